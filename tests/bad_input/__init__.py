"""Bad input, everywhere: each case gets a clear error and loses nothing."""
