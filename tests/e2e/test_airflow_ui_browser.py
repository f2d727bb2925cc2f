"""In a real browser: `airflow standalone` as `make airflow` starts it, headless Chromium logs in
through Airflow's login form, opens the DAG list and the onceflow page, and checks what a
person would see. Screenshots are kept in test-artifacts/airflow-ui/ (git-ignored).

With no network (Chromium resolves only localhost): the onceflow page, an audit report and a
Great Expectations Data Docs page draw their charts and tables from bundled files, log no
console error and send no request off this machine.

Chromium is driven over its DevTools protocol (tests/browser.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from onceflow.local.service import free_port
from tests.browser import CHROMIUM, Browser, is_local
from tests.conftest import ROOT

pytestmark = [pytest.mark.e2e]
ARTIFACTS = ROOT / "test-artifacts" / "airflow-ui"


@pytest.fixture(scope="module")
def airflow(broker, state_home, tmp_path_factory):
    """`python -m onceflow.local.airflow` (what `make airflow` runs) on free ports."""
    home = tmp_path_factory.mktemp("airflow-standalone")
    port = free_port()
    env = dict(
        os.environ,
        ONCEFLOW_KAFKA_BOOTSTRAP=broker.bootstrap,
        ONCEFLOW_HOME=str(state_home),
        ONCEFLOW_REPORTS=str(home / "reports"),  # this module's reports (audit_pages writes one)
        AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT=str(free_port()),
        AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT=str(free_port()),
    )
    for key in [k for k in env if k.startswith("AIRFLOW__DATABASE__") or k in ("AIRFLOW_HOME",)]:
        del env[key]  # the launcher decides these, as for `make airflow`
    log = (home / "standalone.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "onceflow.local.airflow",
            "--port",
            str(port),
            "--home",
            str(home / "home"),
            "--no-broker",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 420
        while "Airflow is ready at" not in (home / "standalone.log").read_text():
            assert proc.poll() is None, (
                f"the launcher exited ({proc.returncode}):\n{(home / 'standalone.log').read_text()[-3000:]}"
            )
            assert time.monotonic() < deadline, (
                f"airflow standalone was not ready within 420s:\n{(home / 'standalone.log').read_text()[-3000:]}"
            )
            time.sleep(2)
        text = (home / "standalone.log").read_text()
        password = re.findall(r"log in as admin / (\S+)", text)[0]
        yield {
            "url": f"http://localhost:{port}",
            "password": password,
            "log": home / "standalone.log",
            "reports": home / "reports",
        }
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
    browser.login_to_airflow(airflow["url"], "admin", airflow["password"])

    browser.goto(f"{url}/dags")
    shipped = sorted(p.stem for p in (ROOT / "pipelines").glob("*.yaml"))  # payments, sensors: five DAGs each
    expected = [f"{name}_{kind}" for name in shipped for kind in ("stream", "batch", "audit", "recover", "backfill")]
    browser.wait_for(
        " && ".join(f"document.body.innerText.includes('{d}')" for d in expected),
        "the five DAGs of each shipped pipeline",
    )
    text = browser.js("document.body.innerText")
    assert "@continuous" in text and f"{len(expected)} Dags" in text
    browser.screenshot(ARTIFACTS / "dag-list.png", tmp_path / "dag-list.png")

    browser.goto(f"{url}/plugin/onceflow")
    frame = "document.querySelector('iframe')"
    browser.wait_for(
        f"!!{frame} && !!{frame}.contentDocument && "
        f"!!{frame}.contentDocument.querySelector('tr[data-pipeline=payments]')",
        "the onceflow page inside the Airflow UI",
    )
    assert browser.js(f"{frame}.src").endswith("/onceflow/")
    row = browser.js(f"{frame}.contentDocument.querySelector('tr[data-pipeline=payments]').innerText")
    header = browser.js(f"{frame}.contentDocument.querySelector('thead').innerText")
    for column in ("verdict", "lag", "last committed batch", "last audit", "report"):
        assert column in header
    assert re.search(r"\b(not_started|stopped|healthy|lagging|dead|failed|stalled|broken|unknown)\b", row), row
    assert "payments.yaml" in row
    browser.screenshot(ARTIFACTS / "onceflow-page.png", tmp_path / "onceflow-page.png")
    assert (ARTIFACTS / "onceflow-page.png").stat().st_size > 10_000


RUN = "20261124T050854Z-66a52d"
DATA = ROOT / "tests" / "data" / "audit-report"
# canvases Chart.js drew on, with ink on them (not an empty box)
DRAWN = (
    "Array.from(document.querySelectorAll('canvas[data-chart]')).filter(c => window.Chart && "
    "Chart.getChart(c) && c.width > 0 && c.getContext('2d').getImageData(0, 0, c.width, c.height).data"
    ".some((v, i) => i % 4 === 3 && v > 0)).length"
)


def _data_docs(run: Path) -> dict:
    """A Data Docs site built by Great Expectations itself (on pandas: no Spark JVM for this module),
    with the audit's first-run result format, then made offline as the audit makes its own."""
    import great_expectations as gx
    import pandas as pd

    from onceflow.audit.validate import FIRST_RUN
    from onceflow.web.datadocs import make_offline

    site = run / "data_docs"
    ctx = gx.get_context(mode="ephemeral")
    for name in list(ctx.variables.data_docs_sites or {}):
        ctx.delete_data_docs_site(name)
    ctx.add_data_docs_site(
        site_name="onceflow_audit",
        site_config={
            "class_name": "SiteBuilder",
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(site)},
        },
    )
    df = pd.DataFrame({"_partition": [0, 0, 1, 1], "_offset": [0, 1, 0, 1], "amount": [1.5, 2.0, 7.25, 3.0]})
    batch = (
        ctx.data_sources.add_pandas("onceflow")
        .add_dataframe_asset("bronze")
        .add_batch_definition_whole_dataframe("bronze")
    )
    suite = ctx.suites.add(
        gx.ExpectationSuite(
            name="bronze",
            expectations=[
                gx.expectations.ExpectColumnValuesToNotBeNull(column="amount"),
                gx.expectations.ExpectColumnValuesToBeBetween(column="amount", min_value=0, max_value=10_000),
                gx.expectations.ExpectTableRowCountToEqual(value=4),
            ],
        )
    )
    vd = ctx.validation_definitions.add(gx.ValidationDefinition(name="bronze", data=batch, suite=suite))
    ctx.checkpoints.add(
        gx.Checkpoint(name="audit-bronze", validation_definitions=[vd], actions=[], result_format=dict(FIRST_RUN))
    ).run(batch_parameters={"dataframe": df})
    ctx.build_data_docs(site_names=["onceflow_audit"])
    make_offline(site)
    page = next((site / "validations" / "bronze").rglob("*.html"))
    return {"index": "data_docs/index.html", "suites": {"bronze": page.relative_to(run).as_posix()}}


@pytest.fixture(scope="module")
def audit_pages(airflow, state_home):
    """payments' last audit: a real failed audit's summary (tests/data/audit-report) rendered with a
    status log of 40 batches and a Data Docs site; the same status log for the onceflow page."""
    from onceflow.audit import report
    from onceflow.audit.html import write_page
    from onceflow.state.status import StatusLog
    from onceflow.web import batch_series

    status = state_home / "pipelines" / "payments" / "status.jsonl"
    created = not status.exists()
    if created:  # another test's run of payments keeps its own log (its batches are charted then)
        status.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(DATA / "status.jsonl", status)
    run = airflow["reports"] / "payments" / RUN
    run.mkdir(parents=True)
    summary = {
        **json.loads((DATA / "summary-failed.json").read_text()),
        "pipeline": "payments",
        "report_dir": str(run),
        "batches": batch_series(StatusLog(DATA, "payments").events()),
        "data_docs": _data_docs(run),
    }
    report.write_summary(run, summary)
    write_page(run, summary)
    report.point_latest(airflow["reports"], "payments", RUN)
    yield run
    if created:
        status.unlink()


def _assert_clean(browser: Browser, what: str) -> None:
    browser.settle(1.0)
    assert not browser.errors, f"{what}: console errors {browser.errors}"
    remote = [u for u in browser.requests if not is_local(u)]
    assert not remote, f"{what} asked the network for {remote}"
    browser.reset_log()


def test_charts_report_and_data_docs_work_with_no_network(airflow, audit_pages, tmp_path):
    """Chromium resolves only localhost: every page draws from bundled files, logs no error, calls no one."""
    if not CHROMIUM:
        pytest.fail("chromium is not installed. Fix: apt-get install chromium (.ci/run does)")
    browser = Browser(height=1000, offline=True)
    try:
        browser.login_to_airflow(airflow["url"], "admin", airflow["password"])
        browser.reset_log()

        # the onceflow page (as Airflow's frame loads it): a row per pipeline, four charts each
        browser.goto(f"{airflow['url']}/onceflow/")
        browser.wait_for(
            "!!document.querySelector('section.pipeline-charts[data-pipeline=payments]')",
            "payments' charts on the onceflow page",
        )
        browser.wait_for(f"{DRAWN} >= 4", "payments' charts drawn (durations, rate, lag, partitions)", 30)
        row = "document.querySelector('tr[data-pipeline=payments]')"
        runs = browser.js(f"Array.from({row}.querySelectorAll('.dag-runs a')).map(a => a.getAttribute('href'))")
        assert runs == [f"/dags/payments_{k}/runs" for k in ("stream", "batch", "audit", "recover", "backfill")]
        assert "lag (offsets)" in browser.js("document.querySelector('thead').innerText")
        browser.screenshot(ARTIFACTS / "onceflow-page-charts.png", tmp_path / "onceflow-page-charts.png")
        _assert_clean(browser, "the onceflow page")

        # its "last audit report" link: the report, served by the onceflow page
        report = browser.js(f"{row}.querySelector('a.report').href")
        assert report.endswith(f"/onceflow/reports/payments/{RUN}/index.html"), report
        browser.goto(report)
        browser.wait_for(f"{DRAWN} === 4", "the report's four charts drawn", 30)
        first = browser.js(
            "Array.from(document.querySelector('main').children).slice(0, 2).map(e => e.id || e.tagName)"
        )
        assert first[0] == "why", first  # the verdict header, then why it failed
        why = browser.js("document.getElementById('why').innerText")
        assert "v4 DELETE" in why and "loss" in why
        groups = browser.js(
            "Array.from(document.querySelectorAll('details.group')).map(d => [d.open, "
            "d.querySelector('summary').innerText])"
        )
        assert all(opened == ("✗" in text) for opened, text in groups[:-1]), groups  # passed groups collapsed
        browser.screenshot(ARTIFACTS / "audit-report-failed.png", tmp_path / "audit-report-failed.png")
        _assert_clean(browser, "the audit report")

        # the Data Docs validation page it links to: jQuery and bootstrap-table from the site, values shown
        browser.js("document.querySelector(\"a[href$='.html'][href*='validations']\").click()")
        browser.wait_for(
            "typeof window.$ === 'function' && !!$.fn.bootstrapTable && "
            "document.querySelectorAll('table tbody tr').length > 0",
            "the Data Docs page's tables",
        )
        text = browser.js("document.body.innerText")
        assert "100% not null" in text and "unknown % not null" not in text, text[:2000]
        browser.screenshot(ARTIFACTS / "data-docs-offline.png", tmp_path / "data-docs-offline.png")
        _assert_clean(browser, "the Data Docs page")

        # and the report opened from disk, as someone opens a copied report folder
        browser.goto((audit_pages / "index.html").as_uri())
        browser.wait_for(f"{DRAWN} === 4", "the report's charts from disk", 30)
        _assert_clean(browser, "the report from disk")
    finally:
        browser.close()
