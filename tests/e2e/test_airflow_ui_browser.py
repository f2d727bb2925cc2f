"""In a real browser: `airflow standalone` as `make airflow` starts it, headless Chromium logs in
through Airflow's login form, opens the DAG list and the onceflow page, and checks what a
person would see. Screenshots are kept in test-artifacts/airflow-ui/ (git-ignored).

Chromium is driven over its DevTools protocol (a websocket; `websockets` is already an
Airflow dependency), so no extra browser driver is needed.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.e2e]
ARTIFACTS = ROOT / "test-artifacts" / "airflow-ui"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Browser:
    """Headless Chromium over the DevTools protocol: navigate, evaluate JS, type, screenshot."""

    def __init__(self, width: int = 1400, height: int = 900):
        from websockets.sync.client import connect

        self.profile = tempfile.mkdtemp(prefix="onceflow-chromium-")
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--remote-debugging-port=0", f"--user-data-dir={self.profile}",
             f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
        port, deadline = None, time.monotonic() + 60
        while port is None and time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            match = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if match:
                port = int(match.group(1))
            elif not line and self.proc.poll() is not None:
                break
        assert port, f"chromium did not open its DevTools port within 60s (exit {self.proc.poll()})"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:
            page = next(p for p in json.load(resp) if p["type"] == "page")
        self._stack = contextlib.ExitStack()
        self.ws = self._stack.enter_context(connect(page["webSocketDebuggerUrl"], max_size=64 * 2**20,
                                                    open_timeout=30))
        self.ids = itertools.count(1)
        self.call("Page.enable")
        self.call("Runtime.enable")

    def call(self, method: str, **params) -> dict:
        msg_id = next(self.ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        deadline = time.monotonic() + 60
        while True:
            msg = json.loads(self.ws.recv(timeout=max(1.0, deadline - time.monotonic())))
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

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
        raise AssertionError(f"waited {timeout:.0f}s for {what} at {self.js('location.href')}; page text: "
                             f"{self.js('document.body ? document.body.innerText.slice(0, 600) : null')!r}")

    def type_into(self, selector: str, text: str) -> None:
        """Focus a field and type into it the way a keyboard does (React sees real input events)."""
        self.js(f"document.querySelector({json.dumps(selector)}).focus()")
        self.call("Input.insertText", text=text)

    def screenshot(self, *paths: Path) -> None:
        data = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        for path in paths:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

    def close(self) -> None:
        try:
            self._stack.close()
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGTERM)
                try:
                    self.proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait(timeout=15)
            shutil.rmtree(self.profile, ignore_errors=True)


@pytest.fixture(scope="module")
def airflow(broker, state_home, tmp_path_factory):
    """`python -m onceflow.airflow.standalone` (what `make airflow` runs) on free ports."""
    home = tmp_path_factory.mktemp("airflow-standalone")
    port = _free_port()
    env = dict(os.environ, ONCEFLOW_KAFKA_BOOTSTRAP=broker.bootstrap, ONCEFLOW_HOME=str(state_home),
               AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT=str(_free_port()),
               AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT=str(_free_port()))
    for key in [k for k in env if k.startswith("AIRFLOW__DATABASE__") or k in ("AIRFLOW_HOME",)]:
        del env[key]  # the launcher decides these, as for `make airflow`
    log = (home / "standalone.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "onceflow.airflow.standalone", "--port", str(port),
                             "--home", str(home / "home"), "--no-broker"],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 420
        while "Airflow is ready at" not in (home / "standalone.log").read_text():
            assert proc.poll() is None, f"the launcher exited ({proc.returncode}):\n" \
                                        f"{(home / 'standalone.log').read_text()[-3000:]}"
            assert time.monotonic() < deadline, "airflow standalone was not ready within 420s:\n" \
                                                f"{(home / 'standalone.log').read_text()[-3000:]}"
            time.sleep(2)
        text = (home / "standalone.log").read_text()
        password = re.search(r"log in as admin / (\S+)", text).group(1)
        yield {"url": f"http://localhost:{port}", "password": password, "log": home / "standalone.log"}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the launcher stops standalone and its components
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        log.close()
        shutil.copy(home / "standalone.log", tmp_path_factory.getbasetemp() / "airflow-standalone.log")


@pytest.fixture
def browser():
    if not CHROMIUM:
        pytest.fail("chromium is not installed. Fix: apt-get install chromium (.ci/run does)")
    b = Browser()
    yield b
    b.close()


def test_anonymous_visitor_gets_the_login_page_not_the_onceflow_page(airflow, browser):
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{airflow['url']}/onceflow/", timeout=30)
    assert refused.value.code == 401
    browser.goto(f"{airflow['url']}/onceflow/")
    browser.wait_for("document.body && document.body.innerText.includes('Not authenticated')", "the 401 body")
    assert "payments" not in browser.js("document.body.innerText")


def test_login_dag_list_and_onceflow_page_in_chromium(airflow, browser, tmp_path):
    url = airflow["url"]
    browser.goto(f"{url}/")
    browser.wait_for("!!document.querySelector('input[name=username]')", "Airflow's login form")
    browser.type_into("input[name=username]", "admin")
    browser.type_into("input[name=password]", airflow["password"])
    browser.wait_for("!document.querySelector('button[type=submit]').disabled", "the enabled Sign in button")
    browser.js("document.querySelector('button[type=submit]').click()")
    browser.wait_for("!location.pathname.startsWith('/auth')", "leaving the login page")

    browser.goto(f"{url}/dags")
    shipped = sorted(p.stem for p in (ROOT / "pipelines").glob("*.yaml"))  # payments, sensors: five DAGs each
    expected = [f"{name}_{kind}" for name in shipped for kind in ("stream", "batch", "audit", "recover", "backfill")]
    browser.wait_for(" && ".join(f"document.body.innerText.includes('{d}')" for d in expected),
                     "the five DAGs of each shipped pipeline")
    text = browser.js("document.body.innerText")
    assert "@continuous" in text and f"{len(expected)} Dags" in text
    browser.screenshot(ARTIFACTS / "dag-list.png", tmp_path / "dag-list.png")

    browser.goto(f"{url}/plugin/onceflow")
    frame = "document.querySelector('iframe')"
    browser.wait_for(f"!!{frame} && !!{frame}.contentDocument && "
                     f"!!{frame}.contentDocument.querySelector('tr[data-pipeline=payments]')",
                     "the onceflow page inside the Airflow UI")
    assert browser.js(f"{frame}.src").endswith("/onceflow/")
    row = browser.js(f"{frame}.contentDocument.querySelector('tr[data-pipeline=payments]').innerText")
    header = browser.js(f"{frame}.contentDocument.querySelector('thead').innerText")
    for column in ("verdict", "lag", "last committed batch", "last audit", "report"):
        assert column in header
    assert re.search(r"\b(not_started|stopped|healthy|lagging|dead|failed|stalled|broken|unknown)\b", row), row
    assert "payments.yaml" in row
    browser.screenshot(ARTIFACTS / "onceflow-page.png", tmp_path / "onceflow-page.png")
    assert (ARTIFACTS / "onceflow-page.png").stat().st_size > 10_000
