"""`onceflow metrics --serve` scraped by a real Prometheus (Debian's package) with onceflow's alert
rules loaded: a pipeline whose topic holds committed records the job has not read shows Kafka's
lag per partition through PromQL, as an independent consumer reads it, and every rule evaluates."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from devkit.kafka import produce_events
from devkit.pipelines import pipeline_file
from onceflow.kafka.admin import watermarks
from onceflow.local.service import free_port

pytestmark = pytest.mark.integration
RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "onceflow-rules.yml"


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


def test_prometheus_scrapes_kafkas_lag_and_loads_the_rules(broker, topic, tmp_path):
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
        assert len(rules) == 7 and all(r["health"] == "ok" for r in rules), rules
        assert not [r["name"] for r in rules if r["state"] != "inactive"]  # nothing is wrong with a new pipeline
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(30)
        for log in logs:
            log.close()
