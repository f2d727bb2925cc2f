"""The tutorial (docs/your-own-pipeline.md) works as written from a fresh state directory: its pipeline
file, and each of its commands that needs no Spark, run as a newcomer runs them, in a directory of
their own with a fresh ONCEFLOW_HOME and no ONCEFLOW_JARS, against the real broker (the session's,
in place of `make kafka-start`). The commands that start Spark (`ingest`, `audit`) are proven by the
integration tests of those commands."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from onceflow.kafka.admin import partitions_of
from onceflow.kafka.consume import committed_counts

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "your-own-pipeline.md"
NEEDS_SPARK = ("ingest", "audit")


def _pipeline_file(text: str) -> str:
    """The YAML block that follows "`pipelines/orders.yaml`:"."""
    return text.split("`pipelines/orders.yaml`:", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]


def _commands(text: str) -> list[list[str]]:
    """Every `onceflow` command of the tutorial, in order: the bash blocks' lines (continuations
    joined) and the inline ones (`onceflow checkpoint status ...`)."""
    found: list[tuple[int, list[str]]] = []
    for block in re.finditer(r"```bash\n(.*?)```", text, re.S):
        for line in block.group(1).replace("\\\n", " ").splitlines():
            words = shlex.split(line)
            if words and words[0].endswith("onceflow"):
                found.append((block.start(), ["onceflow", *words[1:]]))
    for inline in re.finditer(r"`(onceflow [a-z-]+ [^`]*)`", text):
        if "--pipeline pipelines/orders.yaml" in inline.group(1):
            found.append((inline.start(), shlex.split(inline.group(1))))
    return [words for _, words in sorted(found, key=lambda f: f[0])]


def test_the_tutorials_commands_work_as_written_from_a_fresh_state_directory(broker, tmp_path):
    text = TUTORIAL.read_text()
    project = tmp_path / "shop"
    (project / "pipelines").mkdir(parents=True)
    (project / "pipelines" / "orders.yaml").write_text(_pipeline_file(text))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ONCEFLOW_JARS", "ONCEFLOW_PROJECT", "ONCEFLOW_PIPELINES_DIR", "ONCEFLOW_REPORTS")
    }
    env.update(
        ONCEFLOW_HOME=str(tmp_path / "fresh-home"),
        ONCEFLOW_KAFKA_BOOTSTRAP=broker.bootstrap,  # the pipeline file's ${ONCEFLOW_KAFKA_BOOTSTRAP:-...}
        PYTHONPATH=os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]),  # this checkout's onceflow
    )

    def run(words: list[str]) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            [str(Path(sys.executable).with_name("onceflow")), *words[1:]],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, f"{shlex.join(words)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        return proc

    commands = _commands(text)
    assert [c[1] for c in commands] == ["checkpoint", "kafka", "produce", "ingest", "audit", "recover"], commands
    ran = [run(c) for c in commands if c[1] not in NEEDS_SPARK]
    assert "NOT_STARTED" in ran[0].stdout  # the file loads; nothing ran yet (the topic is not there yet)
    assert ran[1].stdout.strip() == f"created topic orders with 3 partitions on {broker.bootstrap}"
    assert partitions_of(broker.bootstrap, "orders") == [0, 1, 2]
    first = committed_counts(broker.bootstrap, "orders")
    assert set(first) == {0, 1, 2} and sum(first.values()) > 15_000  # 20,000 events, a tenth aborted
    # as often as you like: the topic keeps its 3 partitions, whatever produce's --partitions default
    produce = next(c for c in commands if c[1] == "produce")
    run(produce)
    assert partitions_of(broker.bootstrap, "orders") == [0, 1, 2]
    assert sum(committed_counts(broker.bootstrap, "orders").values()) > sum(first.values()) + 15_000
    run(next(c for c in commands if c[1] == "kafka"))  # the topic exists: left as it is
    assert "nothing to recover" in ran[-1].stdout  # "when something fails": JVM-free, here a first run
    # a fresh ONCEFLOW_HOME finds the JVM jars `make setup` resolved in the checkout
    jars = subprocess.run(
        [sys.executable, "-c", "from onceflow.paths import jars_dir; print(jars_dir())"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert jars.stdout.strip() == str(ROOT / ".onceflow" / "jars")
