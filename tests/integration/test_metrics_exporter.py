"""`onceflow metrics --serve`: a real HTTP scrape of a pipeline whose topic holds committed records
the job has not read: the lag per partition is Kafka's, read by an independent consumer."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from devkit.kafka import produce_events
from devkit.pipelines import pipeline_file
from onceflow.kafka.admin import watermarks
from onceflow.local.service import free_port

pytestmark = pytest.mark.integration


def test_the_served_lag_is_kafkas_committed_records_per_partition(broker, topic, tmp_path):
    file, pipeline = pipeline_file(tmp_path / "p", broker.bootstrap, topic)
    produce_events(broker.bootstrap, topic, 300)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "onceflow.cli", "metrics", "--pipeline", str(file), "--serve", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline, text = time.monotonic() + 60, None
        while text is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
                    text = reply.read().decode()
            except OSError:
                assert server.poll() is None, server.stdout.read().decode() if server.stdout else ""
                time.sleep(0.2)
        assert text is not None, "the exporter did not answer within 60 s"
    finally:
        server.terminate()
        server.wait(30)
    found = {f.name: f.samples for f in text_string_to_metric_families(text)}
    lag = {int(s.labels["partition"]): s.value for s in found["onceflow_kafka_lag_offsets"]}
    ends = watermarks(broker.bootstrap, topic)
    assert lag == {p: float(high - low) for p, (low, high) in ends.items()} and sum(lag.values()) >= 300
    verdict = [s.labels["verdict"] for s in found["onceflow_pipeline_verdict"] if s.value == 1.0]
    assert verdict == ["not_started"] and all(
        s.labels["pipeline"] == pipeline.name for s in found["onceflow_kafka_lag_offsets"]
    )
