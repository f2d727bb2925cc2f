"""`onceflow metrics --serve` scraped by a real Prometheus (Debian's package) with onceflow's alert
rules loaded: a pipeline whose topic holds committed records the job has not read shows Kafka's
lag per partition through PromQL, as an independent consumer reads it, and every rule evaluates;
then the job runs and takes the lag to 0, its driver is killed with `kill -9`, and the shipped
OnceflowPipelineDown alert fires (after its `for: 1m`) while the lag rises again."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from devkit.driver import IngestProcess
from devkit.kafka import produce_events
from devkit.pipelines import pipeline_file
from onceflow.kafka.admin import watermarks
from onceflow.local.service import free_port
from tests.browser import CHROMIUM, Browser
from tests.conftest import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.spark]  # the killed driver is a real Spark driver
RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "onceflow-rules.yml"
ARTIFACTS = ROOT / "test-artifacts" / "prometheus"  # git-ignored


def _api(port: int, path: str, **params) -> dict:
    url = f"http://127.0.0.1:{port}/api/v1/{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    with urllib.request.urlopen(url, timeout=10) as reply:
        return json.loads(reply.read())["data"]


def _until(what: str, look, timeout: float = 90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = look()
        except OSError:
            found = None
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"{what} within {timeout:g}s")


def _value(port: int, query: str) -> float | None:
    result = _api(port, "query", query=query)["result"]
    return float(result[0]["value"][1]) if result else None


def _screenshot_alerts(port: int, tmp_path: Path) -> None:
    """Prometheus's own alerts page in Chromium, as an operator sees it: the alert firing, for whom."""
    if not CHROMIUM:
        pytest.fail("chromium is not installed. Fix: apt-get install chromium (.ci/run does)")
    browser = Browser()
    try:
        browser.goto(f"http://127.0.0.1:{port}/classic/alerts")  # Debian's package serves the classic UI
        browser.wait_for("document.body && /OnceflowPipelineDown/.test(document.body.innerText)", "the alerts page")
        browser.js(  # unfold the alert's instances, as a click on it does
            "document.querySelectorAll('.alert_header, [role=button]').forEach(e => e.click()); 1"
        )
        browser.settle()
        text = browser.js("document.body.innerText")
        assert re.search(r"firing", text, re.IGNORECASE) and "OnceflowPipelineDown" in text, text[:2000]
        browser.screenshot(ARTIFACTS / "alerts-firing.png", tmp_path / "alerts-firing.png")
    finally:
        browser.close()


def test_prometheus_scrapes_the_lag_and_fires_the_down_alert_after_a_kill(broker, jars, topic, tmp_path):
    binary = shutil.which("prometheus")
    assert binary, "prometheus is missing. Fix: apt-get install --no-install-recommends prometheus (.ci/run does)"
    file, pipeline = pipeline_file(tmp_path / "p", broker.bootstrap, topic)
    produce_events(broker.bootstrap, topic, 300)
    exporter, web = free_port(), free_port()
    (tmp_path / "prometheus.yml").write_text(
        json.dumps(  # YAML is a superset of JSON
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(RULES)],
                "scrape_configs": [
                    {"job_name": "onceflow", "static_configs": [{"targets": [f"127.0.0.1:{exporter}"]}]}
                ],
            }
        )
    )
    serve = [sys.executable, "-m", "onceflow.cli", "metrics", "--pipeline", str(file), "--serve", str(exporter)]
    prometheus = [
        binary,
        f"--config.file={tmp_path / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{web}",
    ]
    logs = [(tmp_path / name).open("w") for name in ("exporter.log", "prometheus.log")]
    procs = [
        subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        for cmd, log in zip((serve, prometheus), logs, strict=True)
    ]
    try:
        series = _until(
            "Prometheus to hold the lag of every partition",
            lambda: (
                [r for r in _api(web, "query", query="onceflow_kafka_lag_offsets")["result"]]
                if len(_api(web, "query", query="onceflow_kafka_lag_offsets")["result"])
                == len(watermarks(broker.bootstrap, topic))
                else None
            ),
        )
        lag = {int(r["metric"]["partition"]): float(r["value"][1]) for r in series}
        ends = watermarks(broker.bootstrap, topic)
        assert lag == {p: float(high - low) for p, (low, high) in ends.items()} and sum(lag.values()) >= 300
        assert {r["metric"]["pipeline"] for r in series} == {pipeline.name}
        verdict = _api(web, "query", query="onceflow_pipeline_verdict == 1")["result"]
        assert [r["metric"]["verdict"] for r in verdict] == ["not_started"]
        groups = _until("the rules to be evaluated", lambda: _api(web, "rules")["groups"] or None)
        rules = [r for g in groups for r in g["rules"]]
        assert len(rules) == 9 and all(r["health"] == "ok" for r in rules), rules
        assert not [r["name"] for r in rules if r["state"] != "inactive"]  # nothing is wrong with a new pipeline

        job = IngestProcess(pipeline, file, tmp_path).start()
        job.wait_progress(more_than=0, timeout=240)
        total = f'sum(onceflow_kafka_lag_offsets{{pipeline="{pipeline.name}"}})'
        _until("the job to take the lag to 0", lambda: _value(web, total) == 0.0, timeout=120)
        _until("a healthy verdict", lambda: _value(web, 'onceflow_pipeline_verdict{verdict="healthy"}') == 1.0)
        killed = time.time()
        job.kill9()
        produce_events(broker.bootstrap, topic, 200, seed=2)  # the stream goes on; nobody reads it
        alert = 'ALERTS{alertname="OnceflowPipelineDown"}'
        pending = _until("the down alert pending", lambda: _api(web, "query", query=alert)["result"] or None, 60)
        seen = time.time() - killed
        assert pending[0]["metric"]["verdict"] in ("dead", "down") and pending[0]["metric"]["pipeline"] == pipeline.name
        _until("the lag to rise again", lambda: (_value(web, total) or 0) >= 200, 60)
        firing = f'ALERTS{{alertname="OnceflowPipelineDown", alertstate="firing", pipeline="{pipeline.name}"}}'
        fired = _until("the down alert firing", lambda: _api(web, "query", query=firing)["result"] or None, 150)
        fired_after = time.time() - killed
        assert fired[0]["metric"]["severity"] == "page"
        _screenshot_alerts(web, tmp_path)
        print(
            f"kill -9 → OnceflowPipelineDown pending after {seen:.1f}s ({pending[0]['metric']['verdict']}), "
            f"firing after {fired_after:.1f}s (the rule's `for: 1m`)"
        )
        assert fired_after < 60 + seen + 30  # its `for`, and a few scrapes and evaluations
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(30)
        for log in logs:
            log.close()
