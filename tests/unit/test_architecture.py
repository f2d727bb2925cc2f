"""The layers stay as docs/architecture.md draws them: the import contracts (.importlinter)
hold, no module imports another's private name, and the parts that must run without
Spark (recovery, health, the Airflow hooks) or without Airflow (the `onceflow` command's
parsing) really import neither, checked in a fresh interpreter."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
SHELLS = ("spark_apps", "dags", "plugins")
THIN = (*SHELLS, "benchmarks", "devkit")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _lint_imports(config: Path, src: Path, cwd: Path) -> subprocess.CompletedProcess:
    """`lint-imports` on `config` with the package `onceflow` taken from `src`."""
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join([str(src), env["PYTHONPATH"]])
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())",
            "--config",
            str(config),
            "--no-cache",
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_import_contracts_hold():
    """`lint-imports` on the repo's .importlinter: every contract KEPT (the output says which broke and why)."""
    run = _lint_imports(ROOT / ".importlinter", SRC, ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


@pytest.mark.parametrize(
    "module, line, broken",
    [
        # inside the core: ledger is below reconcile, which imports it
        ("ledger.py", "from onceflow import reconcile", ["layers:", "no import cycles"]),
        # inside one package (onceflow.spark): the layers contract does not look there, the cycle one does
        ("spark/class_archive.py", "from onceflow.spark import session", ["no import cycles"]),
    ],
)
def test_import_contracts_break_on_an_import_cycle(tmp_path, module, line, broken):
    """The contracts can fail: a copy of the package with one import added that closes a cycle
    is refused by `lint-imports` on a copy of the repo's .importlinter, naming the import to remove."""
    shutil.copytree(SRC / "onceflow", tmp_path / "src" / "onceflow", ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "src" / "onceflow" / module
    target.write_text(f"{target.read_text()}\n{line}\n")
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    run = _lint_imports(tmp_path / ".importlinter", tmp_path / "src", tmp_path)
    out = " ".join((run.stdout + run.stderr).split())  # the report wraps long lines
    assert run.returncode == 1, out
    assert f"{len(broken)} broken" in out, out
    for name in broken:
        assert re.search(rf"{re.escape(name)}[^.]*? BROKEN", out), (name, out)
    importer, imported = Path(module).stem, line.split()[-1]  # either import of the cycle may be named
    assert f".{importer} -> .{imported}" in out or f".{imported} -> .{importer}" in out, out


def _python_files() -> list[Path]:
    files = sorted((SRC / "onceflow").rglob("*.py"))
    for folder in THIN:
        files += sorted((ROOT / folder).rglob("*.py"))
    return files


def test_no_module_imports_a_private_name_of_another():
    """`from onceflow.x import _name` couples to what x may change freely: make it public or move it."""
    found = []
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("onceflow"):
                found += [
                    f"{path.relative_to(ROOT)}:{node.lineno}: from {node.module} import {a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert not found, "\n".join(found)


def test_every_exception_class_lives_in_errors():
    """One place to find what can go wrong (onceflow.errors); private helpers (`_Name`) excepted."""
    found = []
    for path in sorted((SRC / "onceflow").rglob("*.py")):
        if path.name == "errors.py" and path.parent.name == "onceflow":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.ClassDef)
                and not node.name.startswith("_")
                and any(
                    (b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")).endswith(("Error", "Exception"))
                    for b in node.bases
                )
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: class {node.name}")
    assert not found, "\n".join(found)


def test_thin_shells_import_only_entry_points():
    """spark_apps/, dags/ and plugins/ are shells over onceflow.cli and onceflow.airflow."""
    found = []
    for path in _python_files():
        if path.relative_to(ROOT).parts[0] not in SHELLS:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno}: imports {name}"
                for name in names
                if name.startswith(("onceflow", "tests"))
                and name.split(".")[:2] not in (["onceflow", "cli"], ["onceflow", "airflow"])
            ]
    assert not found, "\n".join(found)


# tree -> the top-level packages it must not import: the product stands alone; the kit (devkit/), which
# tests and benchmarks share, imports neither; benchmarks run without the test tree
NOT_IMPORTED = {
    "src": ("tests", "benchmarks", "devkit"),
    "devkit": ("tests", "benchmarks"),
    "benchmarks": ("tests",),
}


@pytest.mark.parametrize("tree", sorted(NOT_IMPORTED))
def test_the_product_the_kit_and_the_benchmarks_import_only_downwards(tree):
    """What tests and benchmarks share lives once, in devkit/; nothing is copied between them, and
    the product imports neither (it is installed without them)."""
    forbidden = NOT_IMPORTED[tree]
    found = []
    for path in sorted((ROOT / tree).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if node.level == 0
                else []
            )
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno}: imports {name}"
                for name in names
                if name.split(".")[0] in forbidden
            ]
    assert not found, "\n".join(found)


# tests/unit files that name no module, on purpose: they check across modules or outside src
NOT_A_MODULE = {
    "test_architecture.py": "the layers of the whole package",
    "test_docker_stack.py": "docker/, not Python",
    "test_versions.py": "the pinned versions, across the lock, pyproject.toml, jvm/, docker/ and the README",
    "cli/test_refusals.py": "every command's refusals, side by side",
    "test_suite_times.py": "devkit/suite_times.py, the suite's own timing tool (devkit/ is no product package)",
    "test_process_list.py": "tests/process_list.py, the secrets proofs' process-list witness",
    "test_prometheus_rules.py": "deploy/prometheus/, alert rules, not Python",
}


def test_unit_tests_mirror_the_package():
    """tests/unit/<dir>/test_<x>.py tests src/onceflow/<dir>/<x> (a module or a package), or an
    aspect of it as test_<x>_<aspect>.py; anything else is listed in NOT_A_MODULE with why."""
    unit, package = ROOT / "tests" / "unit", SRC / "onceflow"
    found = []
    for path in sorted(unit.rglob("test_*.py")):
        rel = path.relative_to(unit)
        where = package.joinpath(*rel.parts[:-1])
        names = (
            {p.stem for p in where.glob("*.py")} | {p.name for p in where.iterdir() if (p / "__init__.py").exists()}
            if where.is_dir()
            else set()
        )
        if rel.as_posix() not in NOT_A_MODULE and not any(
            path.stem[5:] == n or path.stem[5:].startswith(n + "_") for n in names - {"__init__"}
        ):
            module = (where / path.stem[5:]).relative_to(ROOT).as_posix()
            found.append(
                f"tests/unit/{rel.as_posix()}: no module {module} (.py or package); "
                "rename it after the module it tests, or list it in NOT_A_MODULE with why"
            )
    for folder in sorted({p.parent for p in unit.rglob("test_*.py")}):
        if not (folder / "__init__.py").exists():
            found.append(f"{folder.relative_to(ROOT)}: no __init__.py (test modules of the same name would clash)")
    assert not found, "\n".join(found)


# Modules with logic that only the integration tests can exercise, and why: each other module with
# logic (a function or a method) has its unit test file (test_every_module_with_logic_has_its_unit_tests)
SPARK = "runs Spark: DataFrames, a streaming query or Delta-Spark commits (tests/integration, marked spark)"
ONLY_INTEGRATION = {
    **dict.fromkeys(
        (
            "audit/suites.py",
            "spark/archive_training.py",
            "spark/batch_writer.py",
            "spark/compaction.py",
            "spark/ingest.py",
            "spark/parse.py",
            "spark/avro.py",
            "spark/framed.py",
            "spark/registry_parse.py",
            "spark/sinks/delta.py",
            "spark/sinks/kafka_task.py",
            "spark/sinks/kafka_txn.py",
        ),
        SPARK,
    ),
    **dict.fromkeys(
        ("schema/avro_reference.py", "schema/framed.py"),
        "judges records by a real registry's schemas (tests/integration/test_registry_topics.py)",
    ),
    "kafka/consume.py": "reads records from a real broker (tests/integration/test_producer.py)",
    "kafka/native_read.py": "reads a real broker through librdkafka (tests/integration/test_native_read.py)",
    "audit/kafka_output.py": "reads a real broker's output topic (tests/integration/test_kafka_sink.py)",
    "kafka/preflight.py": "asks a real secured broker what a principal may do (tests/e2e/test_secure_kafka.py)",
    **dict.fromkeys(
        ("local/s3.py", "cli/s3.py", "storage/lease.py", "storage/objects.py", "storage/probe.py"),
        "talks to a real S3 server (tests/integration/test_storage.py)",
    ),
}


def _has_logic(path: Path) -> bool:
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) for n in ast.walk(ast.parse(path.read_text())))


def test_every_module_with_logic_has_its_unit_tests():
    """src/onceflow/<dir>/<x>.py with a function or a method has tests/unit/<dir>/test_<x>.py (or
    test_<x>_<aspect>.py; a package's __init__, test_<package>.py beside the package's folder),
    unless ONLY_INTEGRATION says why only the integration tests can exercise it."""
    unit, package = ROOT / "tests" / "unit", SRC / "onceflow"
    missing, stale = [], []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        folder, name = (rel.parent.parent, rel.parent.name) if path.name == "__init__.py" else (rel.parent, path.stem)
        tests = unit / folder
        has_tests = (tests / f"test_{name}.py").exists() or any(tests.glob(f"test_{name}_*.py"))
        if rel.as_posix() in ONLY_INTEGRATION:
            if has_tests:
                stale.append(f"{rel.as_posix()}: has unit tests now; take it off ONLY_INTEGRATION")
        elif _has_logic(path) and not has_tests:
            missing.append(
                f"src/onceflow/{rel.as_posix()}: no tests/unit/{(folder / f'test_{name}.py').as_posix()}; write it, "
                "or list the module in ONLY_INTEGRATION with why only integration tests can exercise it"
            )
    gone = [m for m in ONLY_INTEGRATION if not (package / m).exists()]
    assert not missing and not stale and not gone, "\n".join(missing + stale + [f"{m}: no such module" for m in gone])


# module -> packages it must not pull in, even transitively; then what it does after importing
NO_SPARK = ("pyspark", "py4j", "delta", "onceflow.spark")
PARSE_BACKFILL = (
    "from onceflow.cli import build_parser; build_parser().parse_args(['backfill', "
    "'--start-offsets', '{\"0\": 1}', '--end-offsets', '{\"0\": 2}'])"
)
LIGHT = {
    # the vocabularies and what the onceflow page reads: every part can use them
    "onceflow.state.status": (NO_SPARK, ""),
    "onceflow.reconcile": (NO_SPARK, ""),
    "onceflow.recovery.cases": (NO_SPARK, ""),
    "onceflow.airflow.dag_kinds": (NO_SPARK, ""),
    "onceflow.audit.report": (NO_SPARK, ""),
    # the audit's comparisons start no JVM (docs/audit.md); Great Expectations itself imports pyspark
    "onceflow.audit.rows": (NO_SPARK, ""),
    "onceflow.audit.aggregates": (NO_SPARK, ""),
    "onceflow.audit.kafka_output": (NO_SPARK, ""),
    "onceflow.recovery": (NO_SPARK, ""),
    "onceflow.health": (NO_SPARK, ""),
    "onceflow.airflow.hooks": (NO_SPARK, ""),
    "onceflow.ranges": (("pyspark", "airflow"), ""),
    "onceflow.cli": (("pyspark", "airflow"), PARSE_BACKFILL),
}


@pytest.mark.parametrize("module", sorted(LIGHT))
def test_light_modules_import_no_spark_or_airflow(module):
    """Imported in a fresh interpreter: none of the forbidden packages lands in sys.modules."""
    forbidden, then = LIGHT[module]
    code = (
        f"import sys, {module}\n{then}\n"
        f"bad = sorted(m for m in sys.modules if any(m == f or m.startswith(f + '.') for f in {forbidden!r}))\n"
        "print(' '.join(bad))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "", f"importing {module} loaded: {run.stdout.split()}"


def test_every_kafka_client_takes_the_clusters_settings():
    """A confluent-kafka client built from a dict literal would reach a secured cluster without its
    settings (issue 40): every Consumer, Producer and AdminClient in onceflow takes its config from
    kafka.client (`.librdkafka(...)`, or a probe's config built on it), and no config outside
    kafka/client.py sets `bootstrap.servers` itself."""
    found = []
    for path in sorted((SRC / "onceflow").rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if (
                rel != "onceflow/kafka/client.py"
                and isinstance(node, ast.Dict)
                and any(isinstance(k, ast.Constant) and k.value == "bootstrap.servers" for k in node.keys)
            ):
                found.append(f"{rel}:{node.lineno}: a config with bootstrap.servers; take it from kafka.client")
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None))
                in ("Consumer", "Producer", "AdminClient")
                and node.args
                and isinstance(node.args[0], ast.Dict)
            ):
                found.append(f"{rel}:{node.lineno}: a Kafka client from a dict literal; use KafkaClient.librdkafka()")
    assert not found, "\n".join(found)
