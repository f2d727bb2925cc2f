"""What the apache-spark provider's SparkSubmitOperator needs to run an onceflow Spark app.

The master comes from the `spark_default` connection (host `local[*]` here,
`spark://…`, `yarn` or `k8s://…` on a cluster), never from this module. The
connector jars go in `--jars`; the onceflow package goes in `--py-files` as a
zip when the master is not local (executors on other machines need it); the
Python that runs the driver is this environment's, so the app imports the same
onceflow as the worker. Computed at execute time: a worker's jars and paths
are the ones that count, not the DAG processor's.
"""

from __future__ import annotations

import os
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import onceflow
from onceflow.errors import SetupError
from onceflow.jvm import classpath_jars
from onceflow.paths import jars_dir, project_root, state_dir
from onceflow.spark.session import driver_java_options, spark_conf

# set by spark_conf() but decided elsewhere: the master by the connection, the jars by --jars
_NOT_IN_CONF = ("spark.master", "spark.jars")
_ENV_PASSED = (
    "ONCEFLOW_HOME",
    "ONCEFLOW_JARS",
    "ONCEFLOW_PROJECT",
    "ONCEFLOW_REPORTS",
    "ONCEFLOW_KAFKA_BOOTSTRAP",
    "ONCEFLOW_SPARK_LOG_LEVEL",
    "ONCEFLOW_DRIVER_MEMORY",
    "ONCEFLOW_SHUFFLE_PARTITIONS",
    "ONCEFLOW_SPARK_UI",
    "ONCEFLOW_SPARK_EVENT_LOG",
)
# (the driver's JVM options, ONCEFLOW_CLASS_ARCHIVE and ONCEFLOW_DRIVER_JAVA_OPTIONS included, reach
# spark-submit's command line through `conf`: the app's own session never sets launch settings)


@dataclass(frozen=True)
class SubmitSettings:
    application: str
    conf: dict[str, str]
    jars: str
    env_vars: dict[str, str]
    py_files: str | None = None
    extra: dict = field(default_factory=dict)


def spark_app(name: str) -> Path:
    """spark_apps/<name>.py of the project checkout, with the fix when it is missing."""
    path = project_root() / "spark_apps" / f"{name}.py"
    if not path.is_file():
        raise SetupError(
            f"{path} does not exist. Fix: run Airflow from an onceflow checkout, or set "
            "ONCEFLOW_PROJECT to one (spark_apps/ holds the spark-submit entry points)."
        )
    return path


def package_zip() -> Path:
    """The onceflow package as a zip for --py-files, rebuilt when the sources change."""
    src = Path(onceflow.__file__).parent
    target = state_dir() / "dist" / f"onceflow-{onceflow.__version__}.zip"
    files = sorted(p for p in src.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    newest = max((p.stat().st_mtime for p in files), default=0)
    if target.is_file() and target.stat().st_mtime >= newest:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in files:
            zf.write(path, Path("onceflow") / path.relative_to(src))
    tmp.replace(target)
    return target


def submit_settings(app: str, master: str) -> SubmitSettings:
    """Application, conf, jars, env and py-files for spark-submit of spark_apps/<app>.py on `master`."""
    conf = {k: v for k, v in spark_conf().items() if k not in _NOT_IN_CONF}
    conf["spark.pyspark.python"] = sys.executable
    conf["spark.pyspark.driver.python"] = sys.executable
    # the driver logs at WARN from its first line (Spark's default profile for spark-submit is INFO)
    conf["spark.driver.extraJavaOptions"] = driver_java_options(log_config=True)
    env = {k: os.environ[k] for k in _ENV_PASSED if os.environ.get(k)}
    env.setdefault("ONCEFLOW_HOME", str(state_dir()))
    env.setdefault("ONCEFLOW_JARS", str(jars_dir()))
    env.setdefault("ONCEFLOW_PROJECT", str(project_root()))
    # the pipeline's spark_master is ${ONCEFLOW_SPARK_MASTER:-local[*]}: the connection decides it
    env["ONCEFLOW_SPARK_MASTER"] = master
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # spark-submit ships in this environment's bin/ (the pyspark wheel): find it there first
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    local = master.startswith("local")
    return SubmitSettings(
        application=str(spark_app(app)),
        conf=conf,
        jars=",".join(str(j) for j in classpath_jars("spark")),
        env_vars=env,
        py_files=None if local else str(package_zip()),
    )
