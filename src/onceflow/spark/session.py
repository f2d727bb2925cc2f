"""One place that builds SparkSessions: master, jars, Delta, quiet logs.

The master comes from the argument, else ONCEFLOW_SPARK_MASTER, else local[*];
so the same code runs on a laptop, a standalone cluster, YARN or Kubernetes.
Connector jars come from `onceflow setup` via spark.jars — nothing is fetched
at run time.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from onceflow.jvm import classpath_jars
from onceflow.paths import state_dir
from onceflow.spark import class_archive
from onceflow.storage.location import S3Settings

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
COMPACT_MIN_FILE_BYTES = 8 * 1024 * 1024
# Spark's defaults ((?i)secret|password|token|access[.]?key, and (?i)url for options) widened
REDACTION_REGEX = r"(?i)secret|password|token|access[.]?key|jaas|sasl\.|ssl\.key|keystore\.key|private"
OPTIONS_REDACTION_REGEX = r"(?i)url|jaas|sasl\.|password|secret|ssl\.key|keystore\.key|truststore\.certificates"


def spark_conf(
    master: str | None = None, ui: bool | None = None, extra: dict[str, str] | None = None
) -> dict[str, str]:
    """The Spark settings onceflow runs with (also handed to spark-submit)."""
    if ui is None:
        ui = os.environ.get("ONCEFLOW_SPARK_UI", "false").lower() in ("1", "true", "yes")
    conf = {
        "spark.master": master or os.environ.get("ONCEFLOW_SPARK_MASTER", "local[*]"),
        "spark.jars": ",".join(str(j) for j in classpath_jars("spark")),
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
        "spark.ui.enabled": str(ui).lower(),
        "spark.ui.showConsoleProgress": "false",
        # small machines: a few shuffle partitions beat the default 200
        "spark.sql.shuffle.partitions": os.environ.get("ONCEFLOW_SHUFFLE_PARTITIONS", "4"),
        "spark.driver.memory": os.environ.get("ONCEFLOW_DRIVER_MEMORY", "2g"),
        "spark.sql.session.timeZone": "UTC",
        # tables are paths, never catalog names: the default warehouse is only an empty
        # spark-warehouse/ in the working directory, so it goes under the state dir
        "spark.sql.warehouse.dir": str(spark_dir() / "warehouse"),
        "spark.databricks.delta.snapshotPartitions": "2",
        # the aggregates MERGE source is a deterministic function of bronze at a pinned version
        # (spark/follower.py), so Delta need not copy it first
        "spark.databricks.delta.merge.materializeSource": "none",
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
        # compiled query code kept per JVM: a batch (Kafka read, parse, Delta writes and log
        # replays, the merge) and an audit each need more than Spark's 100 classes, so with the
        # default every batch compiles most of them again (Janino was a third of a warm driver's
        # CPU); 20-26% less CPU per warm batch and audit (docs/benchmarks.md, "Compiled code kept")
        "spark.sql.codegen.cache.maxEntries": "2000",
        # compaction merges the small files of small batches; a file this big is left as it is
        # (Delta's own auto compaction would otherwise rewrite a large batch's fresh files right
        # after writing them: it compacts on a table's first write in every JVM)
        "spark.databricks.delta.autoCompact.minFileSize": str(COMPACT_MIN_FILE_BYTES),
        # ...but not after each commit: Delta's post-commit check rebuilds the snapshot state, a
        # large share of a small batch (docs/benchmarks.md); the streaming job's follower thread
        # compacts the tables between batches with these same thresholds (spark/compaction.py)
        "spark.databricks.delta.autoCompact.enabled": "false",
        # Kafka client settings reach Spark only as per-read options (kafka.client), never as
        # settings; these widen Spark's redaction of settings, plans and data-source options in
        # the event log and UI to a JAAS line, SASL and private-key values (docs/kafka-security.md)
        "spark.redaction.regex": REDACTION_REGEX,
        "spark.sql.redaction.options.regex": OPTIONS_REDACTION_REGEX,
    }
    # S3A (s3a:// and s3:// paths): where the store is, from the AWS environment; credentials are
    # never Spark settings (they would show in the event log and the UI): S3A reads them from the
    # environment itself (onceflow.storage.location, docs/storage.md)
    conf.update(S3Settings.from_env().hadoop())
    java_options = driver_java_options()
    if java_options:
        conf["spark.driver.extraJavaOptions"] = java_options
    if event_log_enabled():
        # every app's jobs, stages and SQL plans, for `make spark-history` after the app is gone
        # (the live UI is off by default); rolled so a stream that runs for weeks stays readable
        conf.update(
            {
                "spark.eventLog.enabled": "true",
                "spark.eventLog.dir": event_log_dir().as_uri(),
                "spark.eventLog.rolling.enabled": "true",
                "spark.eventLog.rolling.maxFileSize": "128m",
            }
        )
    conf.update(extra or {})
    return conf


def driver_java_options(log_config: bool = False) -> str:
    """The driver JVM's options, joined here only: the class-data archive when there is one
    (spark/class_archive.py), then ONCEFLOW_DRIVER_JAVA_OPTIONS (e.g. a Flight Recording, or
    `-XX:TieredStopAtLevel=1` for short-lived drivers on a small machine:
    docs/pipeline-config.md#environment); with `log_config`, our log4j file (spark-submit's
    drivers, which would otherwise log at Spark's INFO until the app sets the level)."""
    options = [class_archive.java_options(), os.environ.get("ONCEFLOW_DRIVER_JAVA_OPTIONS", "")]
    if log_config:
        options.append(f"-Dlog4j2.configurationFile=file:{log4j2_file()}")
    return " ".join(o for o in options if o)


def event_log_enabled() -> bool:
    """Spark event logs are written unless ONCEFLOW_SPARK_EVENT_LOG is false/0/no."""
    return os.environ.get("ONCEFLOW_SPARK_EVENT_LOG", "true").lower() not in ("0", "false", "no")


def event_log_dir() -> Path:
    """<state>/spark/events: Spark's event logs (created here: Spark refuses to start without it)."""
    path = spark_dir() / "events"
    path.mkdir(parents=True, exist_ok=True)
    return path


# Decided when the JVM starts: under spark-submit they belong to its command line.
LAUNCH_SETTINGS = ("spark.master", "spark.jars", "spark.driver.memory", "spark.driver.extraJavaOptions")


def spark_dir() -> Path:
    """Where Spark's own files go (warehouse, the `artifacts/` its JVM leaves in its working
    directory, derby.log): <state dir>/spark, never the directory a command is run from."""
    return state_dir() / "spark"


@contextlib.contextmanager
def jvm_working_dir() -> Iterator[Path]:
    """Run the block (which starts a Spark JVM) with the working directory at spark_dir().

    Spark 4.0 creates session artifacts under `artifacts/` *relative to the JVM's working
    directory* (ArtifactManager: Utils.createTempDir("artifacts")), and leaves it behind.
    The JVM inherits our working directory when it starts, so it starts in the state dir.
    Relative PYTHONPATH entries are made absolute first: Spark's Python workers start there too."""
    here = Path.cwd()
    target = spark_dir()
    target.mkdir(parents=True, exist_ok=True)
    if os.environ.get("PYTHONPATH"):
        os.environ["PYTHONPATH"] = os.pathsep.join(
            str((here / entry).resolve()) if entry and not os.path.isabs(entry) else entry
            for entry in os.environ["PYTHONPATH"].split(os.pathsep)
        )
    os.chdir(target)
    try:
        yield target
    finally:
        os.chdir(here)


LOG4J2 = """# written by onceflow (onceflow.spark.session.log4j2_file): Spark's own logging at {level}
# (ONCEFLOW_SPARK_LOG_LEVEL) from the first line of a submitted app, so a task log opens with onceflow's lines
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
# on an object store, one warning per checkpoint folder that S3A has no FileContext rename (docs/storage.md)
logger.checkpointfiles.name = {checkpoint_files}
logger.checkpointfiles.level = ERROR
# "Current batch is falling behind" for every batch longer than the trigger: onceflow says it once a run
logger.fallingbehind.name = {falling_behind}
logger.fallingbehind.level = ERROR
# an Avro topic's round trip (to_avro of each decoded record) warns of nullable columns once per task
logger.avroserializer.name = {avro_serializer}
logger.avroserializer.level = ERROR
"""
# Spark warns, for every checkpoint and _delta_log folder on S3, that it falls back to the FileSystem API
# "if rename() is not atomic": known and argued in docs/storage.md, so said once there, not per folder
CHECKPOINT_FILES_LOGGER = "org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager"
# Spark warns "Current batch is falling behind" for every batch that outlasts the trigger interval (≈ 60
# lines a run on S3): onceflow's batch log says it once a run instead (onceflow.spark.batch_log)
FALLING_BEHIND_LOGGER = "org.apache.spark.sql.execution.streaming.runtime.ProcessingTimeExecutor"
# spark/avro.py writes each decoded Avro record again (to_avro) to check it is exactly the payload; Spark
# warns, per task, that its all-nullable columns meet a non-nullable schema: spark/avro._complete checks that
AVRO_SERIALIZER_LOGGER = "org.apache.spark.sql.avro.AvroSerializer"
QUIETED = (
    CHECKPOINT_FILES_LOGGER,
    FALLING_BEHIND_LOGGER,
    AVRO_SERIALIZER_LOGGER,
)  # set to ERROR unless the level is DEBUG


def spark_log_level() -> str:
    return os.environ.get("ONCEFLOW_SPARK_LOG_LEVEL", "WARN").upper()


def log4j2_file() -> Path:
    """<state>/spark/log4j2.properties at spark_log_level(), (re)written when it differs.

    spark-submit starts the driver with Spark's default profile (INFO, ~80 lines before the
    app runs); `-Dlog4j2.configurationFile` pointing here makes it WARN from the start."""
    path = spark_dir() / "log4j2.properties"
    text = LOG4J2.format(
        level=spark_log_level(),
        checkpoint_files=CHECKPOINT_FILES_LOGGER,
        falling_behind=FALLING_BEHIND_LOGGER,
        avro_serializer=AVRO_SERIALIZER_LOGGER,
    )
    if not path.is_file() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return path


def under_spark_submit() -> bool:
    """True when spark-submit started this Python process (the JVM already runs)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(
    app_name: str = "onceflow", master: str | None = None, ui: bool | None = None, extra: dict[str, str] | None = None
):
    """Get or create the SparkSession with onceflow's settings.

    Under spark-submit, master, jars and driver memory are spark-submit's
    (e.g. Airflow's SparkSubmitOperator passes them); everything else is ours.
    """
    from pyspark.sql import SparkSession

    # Python workers (mapInArrow sinks, UDFs) must run this interpreter, which has
    # onceflow and its libraries; PySpark's default is whatever `python3` is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    submitted = under_spark_submit()
    for key, value in spark_conf(master, ui, extra).items():
        if submitted and key in LAUNCH_SETTINGS:
            continue
        builder = builder.config(key, value)
    if submitted:
        spark = builder.getOrCreate()
    else:
        with jvm_working_dir():  # only matters when this starts the JVM
            spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(spark_log_level())
    jvm = spark._jvm
    if jvm is not None and spark_log_level() != "DEBUG":
        for logger in QUIETED:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
                logger, jvm.org.apache.logging.log4j.Level.ERROR
            )
    return spark
