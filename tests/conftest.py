"""Shared fixtures: a real broker on a free port in a temp state dir, a real Spark.

The JVM jars are shared with the checkout (.onceflow/jars, resolved by setup);
everything else a test makes lives under pytest's temp dirs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import Phase, settings

from devkit import use_checkout

ROOT = Path(__file__).resolve().parents[1]

# Property tests (tests/json_space.py): `ci`, what `make test` runs, is a fixed, seeded budget;
# `fuzz` (`make fuzz`) a long random one; the number of examples may be set with FUZZ_EXAMPLES
# (no shrinking in `ci`: each example is a Spark job, and the failing batch is printed whole)
settings.register_profile(
    "ci",
    max_examples=12,
    derandomize=True,
    database=None,
    print_blob=True,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
)
settings.register_profile(
    "fuzz", max_examples=int(os.environ.get("FUZZ_EXAMPLES", "400")), database=None, print_blob=True
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
use_checkout()  # the checkout's jars and project (devkit: the kit tests and benchmarks share)
# The brokers the suite starts (the session's, each module's, the 3-node cluster's, and those of the
# CLI and Airflow processes it runs) carry a test's light load: with the C1 compiler alone they burn
# 0.6 of the CPU (docs/testing.md), and the suite is CPU-bound on 2 cores. Benchmarks keep the default.
os.environ.setdefault("ONCEFLOW_KAFKA_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")


@pytest.fixture(scope="session")
def jars():
    from onceflow import jvm

    jvm.resolve(log=lambda m: None)
    return Path(os.environ["ONCEFLOW_JARS"])


@pytest.fixture(scope="session")
def state_home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("onceflow-home")
    os.environ["ONCEFLOW_HOME"] = str(home)
    return home


@pytest.fixture(scope="session")
def broker(jars, state_home):
    """One real Kafka broker for the session."""
    from onceflow.local.broker import LocalBroker, free_port_pair

    b = LocalBroker(home=state_home / "session-broker", port=free_port_pair())
    b.start(timeout=120)
    yield b
    b.stop()


@pytest.fixture(scope="session")
def s3(jars, state_home):
    """One real S3 API server (S3Proxy) for the session, and the AWS environment that points every
    engine at it: set before any Spark session starts, so S3A knows the endpoint."""
    from onceflow.local.s3 import LocalS3

    server = LocalS3(home=state_home / "session-s3")
    server.start(timeout=60)
    os.environ.update(server.env())
    yield server
    server.stop()


@pytest.fixture(scope="session")
def registry(jars, state_home):
    """One real schema registry (Apicurio, Confluent-compatible API) for the session, started when
    a test first asks for it."""
    from onceflow.local.registry import LocalRegistry
    from onceflow.local.service import free_port

    server = LocalRegistry(home=state_home / "session-registry", port=free_port())
    server.start(timeout=120)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def spark(jars, state_home, s3):
    from onceflow.spark.session import build_session

    session = build_session("onceflow-tests", master="local[2]")
    yield session
    session.stop()


@pytest.fixture
def topic(request) -> str:
    """A topic name unique to the test."""
    name = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")
    return f"t-{name}"[:200]


# The longest modules (docs/testing.md, "Where the time goes"), started first: `make test` runs two
# workers that take a module at a time in collection order (`--dist loadfile --no-loadscope-reorder`),
# so a long module started last would run alone at the end while the other worker idles.
LONGEST_FIRST = (
    "e2e/test_hard_kills.py",
    "e2e/test_airflow_dags.py",
    "e2e/test_cluster_failover.py",
    "e2e/test_secure_kafka.py",
    "e2e/test_cdc_kills.py",
    "e2e/test_avro_kills.py",
    "integration/test_audit.py",
    "integration/test_s3_pipeline.py",
    "integration/test_recovery.py",
    "integration/test_ingest.py",
    "integration/test_clean_stop.py",
    "integration/test_sensors.py",
    "integration/test_spark_standalone.py",
    "integration/test_kafka_sink.py",
)


def _start_order(item) -> int:
    path = item.nodeid.split("::")[0].removeprefix("tests/")
    return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(items):
    """A test that takes the Spark fixture starts a JVM: mark it, so `make test-fast` leaves it out
    even if its module forgot the marker. Then the longest modules first (a stable sort: the
    order within a module, and of the others, is unchanged)."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
    items.sort(key=_start_order)
