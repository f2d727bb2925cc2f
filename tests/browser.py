"""Headless Chromium driven over its DevTools protocol (a websocket; `websockets` is already an
Airflow dependency), so no extra browser driver is needed. Shared by the browser tests.

`Browser(offline=True)` resolves no host but localhost (what a machine with no network sees)
and records every request the page makes, every console error and every uncaught exception,
so a test can prove a page draws its charts from bundled files and never calls out.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

from onceflow import processes

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]", "::1")


class Browser:
    """Headless Chromium over the DevTools protocol: navigate, evaluate JS, type, screenshot."""

    def __init__(self, width: int = 1400, height: int = 900, offline: bool = False):
        from websockets.sync.client import connect

        assert CHROMIUM is not None, "no chromium on PATH"  # its tests skip without one
        self.profile = tempfile.mkdtemp(prefix="onceflow-chromium-")
        # offline: every host but this machine fails to resolve, as on a machine with no network
        no_network = ["--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1"] if offline else []
        self.proc = subprocess.Popen(
            [
                CHROMIUM,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}",
                "--allow-file-access-from-files",
                *no_network,
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        stderr = self.proc.stderr
        assert stderr is not None  # stderr=PIPE
        port, deadline = None, time.monotonic() + 60
        while port is None and time.monotonic() < deadline:
            line = stderr.readline()
            match = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if match:
                port = int(match.group(1))
            elif not line and self.proc.poll() is not None:
                break
        assert port, f"chromium did not open its DevTools port within 60s (exit {self.proc.poll()})"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:
            page = next(p for p in json.load(resp) if p["type"] == "page")
        self._stack = contextlib.ExitStack()
        self.ws = self._stack.enter_context(connect(page["webSocketDebuggerUrl"], max_size=64 * 2**20, open_timeout=30))
        self.ids = itertools.count(1)
        self.requests: list[str] = []  # every URL the pages asked for
        self.errors: list[str] = []  # console errors, uncaught exceptions, failed loads
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call("Log.enable")
        self.call("Network.enable")

    def call(self, method: str, **params) -> dict:
        msg_id = next(self.ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        deadline = time.monotonic() + 60
        while True:
            msg = json.loads(self.ws.recv(timeout=max(1.0, deadline - time.monotonic())))
            self._note(msg)
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def _note(self, msg: dict) -> None:
        """Keep what a test asserts on from the events Chromium sends between answers."""
        method, params = msg.get("method"), msg.get("params") or {}
        if method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails") or {}
            self.errors.append(
                f"exception: {(details.get('exception') or {}).get('description') or details.get('text')}"
            )
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append(
                "console: " + " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
            )
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            entry = params["entry"]
            self.errors.append(f"log: {entry.get('text')} {entry.get('url', '')}".strip())

    def settle(self, seconds: float = 1.0) -> None:
        """Read the events of the next `seconds` (late requests, errors after load)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                self._note(json.loads(self.ws.recv(timeout=left)))
            except TimeoutError:
                break

    def reset_log(self) -> None:
        self.requests.clear()
        self.errors.clear()

    def js(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def wait_for(self, expression: str, what: str, timeout: float = 120):
        deadline, last = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            try:
                last = self.js(expression)
                if last:
                    return last
            except RuntimeError as exc:  # page still loading
                last = str(exc)
            time.sleep(0.5)
        raise AssertionError(
            f"waited {timeout:.0f}s for {what} at {self.js('location.href')}; page text: "
            f"{self.js('document.body ? document.body.innerText.slice(0, 600) : null')!r}"
        )

    def type_into(self, selector: str, text: str) -> None:
        """Focus a field and type into it the way a keyboard does (React sees real input events)."""
        self.js(f"document.querySelector({json.dumps(selector)}).focus()")
        self.call("Input.insertText", text=text)

    def screenshot(self, *paths: Path) -> None:
        data = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        for path in paths:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

    def login_to_airflow(self, url: str, user: str, password: str) -> None:
        """Through Airflow's own login form, as a person does."""
        self.goto(f"{url}/")
        self.wait_for("!!document.querySelector('input[name=username]')", "Airflow's login form")
        self.type_into("input[name=username]", user)
        self.type_into("input[name=password]", password)
        self.wait_for("!document.querySelector('button[type=submit]').disabled", "the enabled Sign in button")
        self.js("document.querySelector('button[type=submit]').click()")
        self.wait_for("!location.pathname.startsWith('/auth')", "leaving the login page")

    def close(self) -> None:
        try:
            self._stack.close()
        finally:
            processes.stop(self.proc, grace=15, group=True, after_kill=15)  # Chromium and its helpers
            shutil.rmtree(self.profile, ignore_errors=True)


def is_local(url: str) -> bool:
    """file:, data:, blob:, about: or a request to this machine."""
    parsed = urlparse(url)
    return parsed.scheme in ("file", "data", "blob", "about", "chrome", "devtools") or parsed.hostname in LOCAL_HOSTS
