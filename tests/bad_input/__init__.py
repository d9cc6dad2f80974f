"""Bad input, everywhere (issue 6, section 2): each case gets a clear error and loses nothing."""
