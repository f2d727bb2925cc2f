"""deploy/prometheus/onceflow-rules.yml: valid for Prometheus (promtool check rules), each alert
firing as its unit tests say (promtool test rules), and every onceflow metric it reads one that
onceflow.metrics exports."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from onceflow.metrics import AUDIT_METRICS, METRICS, READ_METRIC, RECOVERY_METRIC

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"


def _promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool is missing. Fix: apt-get install --no-install-recommends prometheus (.ci/run does)"
    return found


def test_the_rules_are_valid_and_their_unit_tests_pass():
    for args in (["check", "rules", "onceflow-rules.yml"], ["test", "rules", "onceflow-rules.test.yml"]):
        run = subprocess.run([_promtool(), *args], cwd=RULES, capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stdout + run.stderr


def test_the_rules_read_only_metrics_onceflow_exports():
    exported = {m.name for m in METRICS} | {RECOVERY_METRIC[0]} | {n for n, _ in AUDIT_METRICS} | {READ_METRIC[0]}
    used = set(re.findall(r"\bonceflow_[a-z_]+", (RULES / "onceflow-rules.yml").read_text()))
    assert used and used <= exported, used - exported
