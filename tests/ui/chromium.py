"""A small driver for headless Chromium over the DevTools protocol, on a pipe.

``--remote-debugging-pipe`` speaks CDP as NUL-separated JSON on file descriptors 3
(commands in) and 4 (answers out), so no WebSocket library and no port are needed.
The Temporal UI keeps long polls open, which ``--dump-dom --virtual-time-budget``
waits on for ever; here a page is read as often as needed until it says what a test
waits for, with a deadline.

Calls block: from async code run them in a thread (``asyncio.to_thread``) so the
event loop, and any worker on it that the UI queries, keeps running.
"""

from __future__ import annotations

import base64
import fcntl
import itertools
import json
import os
import queue
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

_PAGE_TEXT = """(() => {
  const parts = [document.body ? document.body.innerText : ""];
  for (const frame of document.querySelectorAll("iframe")) {
    try { parts.push(frame.contentDocument.body.innerText); } catch (e) { /* another origin */ }
  }
  return parts.join("\\n");
})()"""


def chromium_binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One headless Chromium with one page (tab)."""

    def __init__(self, binary: str, width: int = 1440, height: int = 1000) -> None:
        self._profile = tempfile.TemporaryDirectory(prefix="sas-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        args = [
            binary,
            "--headless",
            "--no-sandbox",  # runs as root in CI containers
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--remote-debugging-pipe",
            f"--user-data-dir={self._profile.name}",
            f"--window-size={width},{height}",
            "about:blank",
        ]
        # Chromium expects the pipe ends on 3 and 4. Copies above 9 first, so that moving one
        # onto 3 or 4 never overwrites the other.
        child_in = fcntl.fcntl(to_child_r, fcntl.F_DUPFD_CLOEXEC, 10)
        child_out = fcntl.fcntl(from_child_w, fcntl.F_DUPFD_CLOEXEC, 10)
        log = os.open(os.environ.get("SAS_CHROMIUM_LOG", os.devnull), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        self._pid = os.posix_spawn(
            binary,
            args,
            os.environ,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, child_in, 3),
                (os.POSIX_SPAWN_DUP2, child_out, 4),
                (os.POSIX_SPAWN_DUP2, log, 1),
                (os.POSIX_SPAWN_DUP2, log, 2),
            ],
        )
        for fd in (to_child_r, from_child_w, child_in, child_out, log):
            os.close(fd)
        self._ids = itertools.count(1)
        self._answers: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            page=True,
        )

    def _read(self) -> None:
        buffer = b""
        while True:
            chunk = os.read(self._from_child, 65536)
            if not chunk:
                return
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                waiting = self._answers.get(message.get("id", -1))
                if waiting is not None:
                    waiting.put(message)

    def call(
        self, method: str, params: dict[str, Any] | None = None, *, page: bool = False, timeout: float = 30
    ) -> Any:
        """Send one CDP command (to the page's session if ``page``) and return its result."""
        message_id = next(self._ids)
        answer: queue.Queue[dict[str, Any]] = queue.Queue()
        self._answers[message_id] = answer
        message: dict[str, Any] = {"id": message_id, "method": method, "params": params or {}}
        if page:
            message["sessionId"] = self._session
        with self._lock:
            os.write(self._to_child, json.dumps(message).encode() + b"\0")
        try:
            reply = answer.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"Chromium did not answer {method} within {timeout}s") from None
        finally:
            del self._answers[message_id]
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def open(self, url: str) -> None:
        self.call("Page.navigate", {"url": url}, page=True)

    def text(self) -> str:
        """What the page shows: its body's rendered text, then that of its same-origin frames
        (the UI renders user metadata as markdown in frames of its own)."""
        return str(self.evaluate(_PAGE_TEXT) or "")

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, page=True)
        return result.get("result", {}).get("value")

    def wait_for_text(self, *needles: str, timeout: float = 30.0) -> str:
        """The page's text once it contains every one of ``needles``; AssertionError after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.text()
            missing = [n for n in needles if n not in text]
            if not missing:
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"the page never showed {missing!r} within {timeout}s; it shows:\n{text[:3000]}")
            time.sleep(0.3)

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", {"format": "png"}, page=True)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except (TimeoutError, RuntimeError, OSError):
            pass
        deadline = time.monotonic() + 10
        while os.waitpid(self._pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                os.kill(self._pid, signal.SIGKILL)
                os.waitpid(self._pid, 0)
                break
            time.sleep(0.1)
        os.close(self._to_child)
        self._reader.join(timeout=5)
        os.close(self._from_child)
        self._profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
