"""Pipeline config: pipelines/<name>.yaml, loaded once and validated with clear errors.

Addresses and secrets come from the environment through ${VAR} or ${VAR:-default}
in the YAML, so the same file serves a laptop and the docker stack. Relative
paths resolve under the onceflow state directory.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from onceflow.cdc.spec import DEBEZIUM, DEFAULT_DELETE_WHEN, KeyedSpec, resolve
from onceflow.errors import ConfigError, DeclarationError
from onceflow.paths import state_dir
from onceflow.schema.model import AggregatesSpec, Schema
from onceflow.schema.registry_fields import with_registry_fields

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|seconds?|min|minutes?|h|hours?|d|days?)\s*$")
_UNIT_SECONDS = {
    "ms": 0.001,
    "millisecond": 0.001,
    "milliseconds": 0.001,
    "s": 1,
    "second": 1,
    "seconds": 1,
    "min": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
}


def duration_seconds(text: str) -> float:
    """'10 seconds' / '1 minute' / '500 ms' / '7 days' -> seconds; ValueError with the accepted forms."""
    match = _DURATION.match(str(text))
    if not match:
        raise ValueError(f"{text!r} is not a duration; write e.g. '500 ms', '10 seconds', '1 minute'")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def _duration_text(text: str) -> str:
    duration_seconds(text)
    return text


# a duration as the file writes it ('10 seconds'), checked at load; the text stays (Spark reads it as written)
Duration = Annotated[str, AfterValidator(_duration_text)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


# client settings whose values are secrets: only ever `${VAR}` in a file, masked wherever shown
SECRET_SETTINGS = frozenset(
    {
        "sasl.password",
        "sasl.jaas.config",
        "sasl.oauthbearer.client.secret",
        "ssl.key.password",
        "ssl.key.pem",
        "ssl.keystore.password",
        "ssl.truststore.password",
    }
)


def is_secret_setting(key: str) -> bool:
    """A Kafka client setting whose value must not be written in a file or shown."""
    key = key.lower()
    return key in SECRET_SETTINGS or "password" in key or "secret" in key


def client_settings(value: Mapping[str, Any] | None) -> dict[str, str]:
    """Kafka client settings (a pipeline's `kafka:` mapping, a connection's extra): values as text,
    booleans in librdkafka's spelling; an empty value is no setting, so a shipped file can write
    `${VAR:-}` for a setting only some users have. ValueError for a nested value."""
    out = {}
    for key, v in (value or {}).items():
        if isinstance(v, (dict, list)):
            raise ValueError(
                f"{key}: a client setting is one value (text, a number or true/false), not a {type(v).__name__}"
            )
        text = "" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
        if text != "":  # `key: ${VAR:-}` with VAR unset reads as YAML's null
            out[str(key)] = text
    return out


class Source(_Model):
    """Kafka source. Isolation is always read_committed: it is not a setting."""

    # may be left out when kafka_connection names a connection that holds bootstrap.servers
    bootstrap_servers: str = ""
    # client settings in librdkafka's names (security.protocol, sasl.*, ssl.*, client.id,
    # timeouts), for every Kafka client onceflow runs; secrets only as ${VAR} (docs/kafka-security.md)
    kafka: dict[str, str] = Field(default_factory=dict)
    # an Airflow `kafka` connection (its extra: a librdkafka config dict) to take the servers and
    # settings from; outside Airflow, AIRFLOW_CONN_<ID> in the environment (docs/kafka-security.md)
    kafka_connection: str | None = None
    topic: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = Field(default=100_000, gt=0)
    # a scheduled available-now run has no latency to keep: larger batches amortise the
    # fixed cost of each batch's Delta commits (docs/benchmarks.md). None: as above.
    available_now_max_offsets_per_trigger: int | None = Field(default=None, gt=0)
    min_partitions: int | None = Field(default=None, gt=0)
    # a batch of at most this many offsets is brought to the driver and committed by delta-rs
    # (milliseconds per table, against about half a second for a Delta-Spark commit); larger
    # ones by Spark's Delta writer. The driver holds the batch's rows: lower it for wide
    # records, 0 for Spark's writer always (docs/pipeline-config.md)
    driver_commit_max_offsets: int = Field(default=50_000, ge=0)

    def max_offsets(self, available_now: bool) -> int | None:
        """Spark's maxOffsetsPerTrigger for a run in this mode (None: no limit)."""
        if available_now and self.available_now_max_offsets_per_trigger:
            return self.available_now_max_offsets_per_trigger
        return self.max_offsets_per_trigger

    @field_validator("starting_offsets")
    @classmethod
    def _offsets(cls, v: str) -> str:
        if v in ("earliest", "latest") or v.lstrip().startswith("{"):
            return v
        raise ValueError("must be 'earliest', 'latest' or a JSON object like {\"topic\":{\"0\":42}}")

    @field_validator("kafka", mode="before")
    @classmethod
    def _settings(cls, v):
        return client_settings(v)

    @model_validator(mode="after")
    def _servers_named(self) -> Source:
        if not self.bootstrap_servers.strip() and not self.kafka_connection:
            raise ValueError(
                "source.bootstrap_servers is empty and no kafka_connection is named; set one of them "
                "(e.g. bootstrap_servers: ${ONCEFLOW_KAFKA_BOOTSTRAP:-localhost:9092})"
            )
        return self


class TableSink(_Model):
    path: str = Field(min_length=1)
    # a new table gets Delta auto compaction: small files are merged after a write once
    # enough have gathered (docs/pipeline-config.md)
    auto_compact: bool = True


class DerivedSink(TableSink):
    """A table the follower derives from bronze by MERGE (spark/follower.py): the aggregates and
    the keyed table."""

    # a new table gets deletion vectors: each MERGE then writes only the rows it changes,
    # instead of copying every file it touches (docs/pipeline-config.md)
    deletion_vectors: bool = True
    # how often a continuous run merges the bronze batches that arrived since the last
    # merge (one MERGE for all of them, off the batches' path; an available-now run merges
    # at its end): the table trails bronze by about this much (docs/pipeline-config.md)
    merge_every: Duration = "10 seconds"

    @property
    def merge_every_seconds(self) -> float:
        return duration_seconds(self.merge_every)


class AggregateSink(DerivedSink, AggregatesSpec):
    """Per `group_by` and event-time window, the declared `metrics` (schema/model.py)."""

    window: Duration = "1 minute"
    watermark: Duration = "10 minutes"

    # the durations in seconds, parsed here once (the text stays: Spark SQL reads it as written)
    @property
    def window_seconds(self) -> float:
        return duration_seconds(self.window)

    @property
    def watermark_seconds(self) -> float:
        return duration_seconds(self.watermark)


class KeyedSink(DerivedSink):
    """A current-state table: per key, the row of its newest change (docs/cdc.md), derived from
    bronze by the follower (spark/follower.py). Its fields are checked against the schema at load
    (cdc/spec.py)."""

    keys: tuple[str, ...] = Field(min_length=1)
    # one name or a list, compared in order: a declared field, or with Debezium an envelope position
    # (`source.lsn`, `ts_ms`, `[source.ts_ms, source.lsn]`), each compared as its type says
    sequence_by: str | tuple[str, ...]
    delete_when: str = DEFAULT_DELETE_WHEN
    scd: int = 1
    # how long a deleted key's tombstone is kept: a change older than the delete that arrives
    # later than this is applied as if the key had never been deleted (docs/cdc.md#tombstones-and-retention)
    tombstone_retention: str = "7 days"
    # a table up to this many MiB takes small batches' changes from the driver with delta-rs, which
    # rewrites the files a MERGE touches; a larger one through Spark, whose deletion vectors spare
    # that (0: always Spark; docs/cdc.md#how-the-job-keeps-it)
    driver_merge_max_mib: int = Field(default=16, ge=0)

    @field_validator("scd")
    @classmethod
    def _scd(cls, v: int) -> int:
        if v == 2:
            raise ValueError(
                "scd: 2 (every version of a row, with validity columns) is not supported yet; "
                "scd: 1 keeps the current row per key"
            )
        if v != 1:
            raise ValueError(f"scd: {v} is not a type; 1 keeps the current row per key")
        return v

    @field_validator("tombstone_retention")
    @classmethod
    def _retention(cls, v: str) -> str:
        if duration_seconds(v) <= 0:
            raise ValueError(
                f"{v!r} keeps no tombstone, so a late older change could undo any delete; write e.g. '7 days'"
            )
        return v

    @property
    def tombstone_retention_seconds(self) -> float:
        return duration_seconds(self.tombstone_retention)

    def check_against(self, schema: Schema) -> KeyedSpec:
        """The keys, sequence and delete marker resolved against the schema; DeclarationError
        naming the field (`sinks.current.keys`) and the fix."""
        return resolve(schema, self.keys, self.sequence_by, self.delete_when, where="sinks.current")


class KafkaSink(_Model):
    """Transactional, exactly-once Kafka output (see docs/kafka-sink.md)."""

    topic: str = Field(min_length=1)
    # another cluster than the source's; it takes the source's client settings unless it states
    # its own `kafka` mapping or `kafka_connection`
    bootstrap_servers: str | None = None
    kafka: dict[str, str] | None = None
    kafka_connection: str | None = None
    ledger_topic: str | None = None
    # default: the schema's event_id, else the aggregates' first group_by field (Pipeline.kafka_key)
    key: str | None = None
    # bronze's columns as JSON; timestamps with microseconds, as bronze holds them
    value: str = "to_json(struct(*), map('timestampFormat', \"yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX\"))"
    partitions: int = Field(default=4, gt=0)

    @field_validator("kafka", mode="before")
    @classmethod
    def _settings(cls, v):
        return None if v is None else client_settings(v)


class Sinks(_Model):
    bronze: TableSink
    quarantine: TableSink
    aggregates: AggregateSink | None = None
    # the current state per key of a topic of row changes (docs/cdc.md)
    current: KeyedSink | None = None
    kafka: KafkaSink | None = None


class Trigger(_Model):
    processing_time: Duration = "1 second"

    @property
    def seconds(self) -> float:
        """processing_time in seconds (the text stays: Spark's trigger takes it as written)."""
        return duration_seconds(self.processing_time)


class Health(_Model):
    """Thresholds of `onceflow checkpoint status` verdicts."""

    max_lag: int = Field(default=50_000, ge=0)
    stalled_after_triggers: int = Field(default=10, gt=0)
    dead_after_seconds: float = Field(default=120, gt=0)
    # a new run's driver start, table checks and first batch: 20 s on 2 cores (docs/benchmarks.md)
    start_grace_seconds: float = Field(default=90, gt=0)
    # a recovery's stop, plan, execute and relaunch, from its start to its new app's lock: minutes;
    # past this, `recovering` (exit 0) turns into the problem it did not fix (exit 1)
    recovery_grace_seconds: float = Field(default=900, gt=0)


# a stream DAG run's window (docs/airflow.md): long enough to be worth a run, short enough to be watched
STREAM_WINDOW_BOUNDS = (10.0, 4 * 3600.0)
# how long the app runs on after its watcher's last renewal: covers the gap between two stream runs
LEASE_GRACE_BOUNDS = (10.0, 3600.0)


def _within(text: str, bounds: tuple[float, float], what: str) -> str:
    low, high = bounds
    if not low <= duration_seconds(text) <= high:
        raise ValueError(f"{text!r} is outside {low:g} s to {high:g} s, the range of {what}")
    return text


class EmailNotify(_Model):
    """Mail through an Airflow SMTP connection (the smtp provider's SmtpNotifier)."""

    connection: str = Field(default="smtp_default", min_length=1)
    to: list[str] = Field(min_length=1)
    # default: the connection's `from_email` extra
    from_: str | None = Field(default=None, alias="from")


class SlackNotify(_Model):
    """A Slack incoming webhook through an Airflow `slackwebhook` connection (SlackWebhookNotifier)."""

    connection: str = Field(default="slack_default", min_length=1)


class Notify(_Model):
    """Who hears of an incident, through Airflow's notifiers (docs/operations.md#notifications)."""

    email: EmailNotify | None = None
    slack: SlackNotify | None = None
    # any other Airflow notifier (PagerDuty, Opsgenie, Teams, ...): `package.module:function`, called
    # with the incident (onceflow.airflow.notify.Incident), returning a BaseNotifier
    notifiers: list[Annotated[str, Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")]] = []
    # where a message's runbook links point (e.g. your docs site); default: the path in the repository
    docs_url: str | None = None

    @property
    def targets(self) -> list[EmailNotify | SlackNotify | str]:
        return [t for t in (self.email, self.slack) if t is not None] + list(self.notifiers)


class Airflow(_Model):
    """How the pipeline's Airflow DAGs run it (docs/airflow.md)."""

    # how long one `<p>_stream` run watches the app (the app runs on across runs)
    window: Duration = "30 minutes"
    # how long the app runs on once nobody renews its lease (the stream DAG paused, Airflow gone)
    lease_grace: Duration = "2 minutes"
    # a warm standby driver beside the app, which takes over the moment it dies (onceflow.state.standby)
    standby: bool = False
    # incidents (a stream alert, a recovery's start and end, a failed audit) sent to people
    notify: Notify = Notify()

    @field_validator("window")
    @classmethod
    def _window(cls, v: str) -> str:
        return _within(v, STREAM_WINDOW_BOUNDS, "a stream window")

    @field_validator("lease_grace")
    @classmethod
    def _grace(cls, v: str) -> str:
        return _within(v, LEASE_GRACE_BOUNDS, "a lease's grace")

    @property
    def window_seconds(self) -> int:
        """The window in whole seconds (the stream DAG's `window_seconds` param is an integer)."""
        return round(duration_seconds(self.window))

    @property
    def lease_grace_seconds(self) -> float:
        return duration_seconds(self.lease_grace)


class Pipeline(_Model):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    source: Source
    schema_: Schema = Field(alias="schema")
    sinks: Sinks
    checkpoint: str = Field(min_length=1)
    trigger: Trigger = Trigger()
    health: Health = Health()
    airflow: Airflow = Airflow()
    spark_master: str | None = None
    file: str = Field(default="", exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data):
        if isinstance(data, dict) and "event" in data:
            raise ValueError(
                "the `event` section was replaced by `schema` (fields, types and rules; "
                "max_bytes moved to schema.max_bytes, a list of allowed values to an `allowed` rule on its field): "
                "see docs/pipeline-config.md#schema and pipelines/payments.yaml"
            )
        return data

    @model_validator(mode="after")
    def _declared(self) -> Pipeline:
        agg = self.sinks.aggregates
        if agg is not None:
            agg.check_against(self.schema_)
        if self.sinks.current is not None:
            self.sinks.current.check_against(self.schema_)
        elif self.schema_.format == DEBEZIUM:
            raise DeclarationError(
                "sinks.current",
                "missing: schema.format debezium reads row changes, and they need a keyed table",
                "add sinks.current with `path`, `keys` and `sequence_by` (docs/cdc.md)",
            )
        if self.sinks.kafka is not None and self.kafka_key is None:
            raise ValueError(
                "sinks.kafka.key is not set and there is neither schema.event_id nor an aggregates "
                "group_by to default to; set sinks.kafka.key to a SQL expression over bronze columns"
            )
        return self

    @cached_property
    def keyed(self) -> KeyedSpec | None:
        """The keyed table's declaration resolved (cdc/spec.py), None without sinks.current;
        resolved once (the batches and the follower ask for it every batch)."""
        current = self.sinks.current
        return current.check_against(self.schema_) if current is not None else None

    @property
    def schema(self) -> Schema:  # type: ignore[override]  # shadows pydantic's deprecated BaseModel.schema()
        return self.schema_

    @property
    def registry_subject(self) -> str | None:
        """The registry subject an Avro topic's records are written with: as set, else `<topic>-value`."""
        registry = self.schema_.registry
        if registry is None:
            return None
        return registry.subject or f"{self.source.topic}-value"

    @property
    def kafka_key(self) -> str | None:
        """The Kafka sink's record key: as set, else event_id, else the first group_by field."""
        sink = self.sinks.kafka
        if sink is not None and sink.key:
            return sink.key
        if self.schema_.event_id:
            return self.schema_.event_id
        return self.sinks.aggregates.group_by[0] if self.sinks.aggregates is not None else None

    def resolve(self, path: str) -> str:
        """A sink/checkpoint path: absolute or URI as is; relative under ONCEFLOW_DATA_ROOT (a folder
        or an `s3://bucket/prefix`: docs/storage.md), else under the state dir."""
        if "://" in path or os.path.isabs(path):
            return path
        root = os.environ.get("ONCEFLOW_DATA_ROOT")
        if root:
            return f"{root.rstrip('/')}/{path}" if "://" in root else str(Path(root).resolve() / path)
        return str(state_dir() / path)

    @property
    def checkpoint_path(self) -> str:
        return self.resolve(self.checkpoint)

    @property
    def state_path(self) -> Path:
        """Where onceflow keeps this pipeline's status, locks and recovery records."""
        return state_dir() / "pipelines" / self.name


def _substitute(text: str, env: dict[str, str], file: str) -> str:
    def repl(m: re.Match) -> str:
        name, default = m.group(1), m.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise ConfigError(
            f"{file}: ${{{name}}} is used but not set. Fix: export {name}=… or write ${{{name}:-default}} in the file."
        )

    return _ENV_REF.sub(repl, text)


def _where(loc: tuple) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"


def load(path: str | Path, env: dict[str, str] | None = None) -> Pipeline:
    """Load and validate one pipeline file; ConfigError names the file, field and fix."""
    path = Path(path)
    try:
        raw = path.read_text()
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot read pipeline config ({exc.strerror}). "
            f"Fix: pass an existing file, e.g. pipelines/payments.yaml."
        ) from None
    _refuse_written_secrets(raw, path)
    text = _substitute(raw, dict(os.environ) if env is None else env, str(path))
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of fields at the top level")
    data = with_registry_fields(data, str(path), state_dir())  # `fields: registry`: read at each load
    try:
        pipeline = Pipeline.model_validate({**data, "file": str(path)})
    except ValidationError as exc:
        lines = _field_errors(exc)
        raise ConfigError(f"{path}: invalid pipeline config:\n" + "\n".join(lines)) from None
    return pipeline


def _refuse_written_secrets(raw: str, path: Path) -> None:
    """A secret Kafka setting must be a whole `${VAR}` (or `${VAR:-}`) in the file as written,
    checked before substitution: a password in a pipeline file ends up in git and in every copy."""
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError:
        return  # reported after substitution, with the substituted text
    if not isinstance(data, dict):
        return

    def section(parent: dict, name: str) -> dict:
        value = parent.get(name)
        return value if isinstance(value, dict) else {}

    registry = section(section(data, "schema"), "registry")
    password = registry.get("password")
    if password not in (None, ""):
        match = _ENV_REF.fullmatch(str(password).strip())
        if match is None or match.group(2):
            raise ConfigError(
                f"{path}: schema.registry.password is a secret written in the file. Fix: write "
                "password: ${ONCEFLOW_REGISTRY_PASSWORD} and export it; a secret has no default (docs/registry.md)."
            )
    sink, source = section(section(data, "sinks"), "kafka"), section(data, "source")
    for where, settings in (("source.kafka", source.get("kafka")), ("sinks.kafka.kafka", sink.get("kafka"))):
        for key, value in (settings or {}).items() if isinstance(settings, dict) else ():
            if not is_secret_setting(str(key)) or value in (None, ""):
                continue
            match = _ENV_REF.fullmatch(str(value).strip())
            if match is None or match.group(2):
                name = "KAFKA_" + re.sub(r"[^A-Z0-9]+", "_", str(key).upper()).strip("_")
                raise ConfigError(
                    f"{path}: {where}.{key} is a secret written in the file. Fix: write {key}: ${{{name}}} "
                    f"and export {name} (or name an Airflow kafka connection in source.kafka_connection); "
                    "a secret has no default (docs/kafka-security.md)."
                )


def load_all(folder: str | Path) -> list[Pipeline]:
    return [load(p) for p in sorted(Path(folder).glob("*.yaml"))]


# how long a stop may wait for the batch in flight (seconds from the request): one large batch on a small
# machine, and some; here, not in onceflow.spark.stop, so the CLI and the Airflow hooks read it without Spark
DEFAULT_STOP_TIMEOUT = 120.0


# -- finding a pipeline by name or path ------------------------------------------------
DEFAULT_PIPELINE = "payments"


def pipelines_dir() -> Path:
    """The project's pipelines folder: $ONCEFLOW_PIPELINES_DIR, else pipelines/ in the checkout
    (found beside the package, or $ONCEFLOW_PROJECT) — never relative to the working directory."""
    from onceflow.paths import project_root

    env = os.environ.get("ONCEFLOW_PIPELINES_DIR")
    return Path(env).resolve() if env else project_root() / "pipelines"


def find_pipeline(name_or_path: str | Path | None = None) -> Path:
    """The YAML file of a pipeline given by name (`payments`: <pipelines dir>/payments.yaml) or by
    path (absolute; else relative to the working directory, the checkout or the pipelines dir, so
    `pipelines/payments.yaml` and `payments.yaml` work from anywhere). ConfigError lists the
    pipelines that exist."""
    spec = str(name_or_path or DEFAULT_PIPELINE)
    folder = pipelines_dir()
    looks_like_path = "/" in spec or os.sep in spec or spec.endswith((".yaml", ".yml"))
    if looks_like_path:
        from onceflow.paths import project_root

        path = Path(spec).expanduser()
        candidates = [path] if path.is_absolute() else [path, project_root() / path, folder / path]
        for candidate in candidates:
            if candidate.is_file():
                return candidate.resolve()
        raise ConfigError(
            f"{spec}: no such pipeline file. Fix: pass an existing YAML file, or a pipeline name ({_holds(folder)})"
        )
    for suffix in (".yaml", ".yml"):
        if (folder / f"{spec}{suffix}").is_file():
            return (folder / f"{spec}{suffix}").resolve()
    raise ConfigError(
        f"no pipeline named {spec!r} ({_holds(folder)}). Fix: pass one of those names or the path "
        "of a pipeline YAML, or set ONCEFLOW_PIPELINES_DIR to the folder that holds yours"
    )


def _holds(folder: Path) -> str:
    names = sorted({p.stem for p in folder.glob("*.y*ml")}) if folder.is_dir() else []
    return f"{folder} holds: {', '.join(names)}" if names else f"{folder} holds no pipeline YAML"


def load_pipeline(name_or_path: str | Path | None = None) -> Pipeline:
    """find_pipeline + load: what every command's --pipeline means."""
    return load(find_pipeline(name_or_path))


# -- validation errors a person can read -------------------------------------------------
_INTERNAL_FIELDS = ("file",)


def _model_at(loc: tuple) -> type[BaseModel] | None:
    """The config model that holds the fields at `loc` (Pipeline for the top level), if any."""
    model: type[BaseModel] | None = Pipeline
    for part in loc:
        field = model.model_fields.get(str(part)) if model is not None else None
        if field is None:
            return None
        model = _model_in(field.annotation)
    return model


def _model_in(annotation) -> type[BaseModel] | None:
    import typing

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _known(model: type[BaseModel] | None) -> list[str]:
    """The fields a file may set at this level, as it spells them (aliases: `schema`)."""
    fields = model.model_fields if model else {}
    return [info.alias or name for name, info in fields.items() if name not in _INTERNAL_FIELDS]


def _field_errors(exc: ValidationError) -> list[str]:
    """One line per invalid field with its fix. A misspelt field is named with the field it
    most likely meant (and the "missing" error that the misspelling causes is folded into it);
    no value of the file is shown, only the field, the problem and the fix."""
    import difflib

    errors = exc.errors()
    meant: dict[tuple, str] = {}  # unknown field's loc -> the known field it most likely is
    for err in errors:
        loc = tuple(err["loc"])
        if err["type"] == "extra_forbidden":
            model = _model_at(loc[:-1])
            known = _known(model)
            close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
            if close:
                meant[loc] = close[0]
    explained = {(*loc[:-1], name) for loc, name in meant.items()}
    lines = []
    for err in errors:
        loc = tuple(err["loc"])
        field = _where(loc)
        if err["type"] == "missing":
            if loc in explained:
                continue
            lines.append(f"  field `{field}`: missing. Fix: add `{field}` to the file")
        elif err["type"] == "extra_forbidden":
            if loc in meant:
                right = _where((*loc[:-1], meant[loc]))
                lines.append(
                    f"  field `{field}`: unknown field; did you mean `{right}`? Fix: rename `{field}` to `{right}`"
                )
            else:
                model = _model_at(loc[:-1])
                lines.append(
                    f"  field `{field}`: unknown field. Fix: remove it, or use one of: {', '.join(_known(model))} "
                    "(docs/pipeline-config.md)"
                )
        elif isinstance((err.get("ctx") or {}).get("error"), DeclarationError):
            declared = err["ctx"]["error"]  # names its own field: no input to show
            lines.append(f"  field `{declared.field}`: {declared.problem}. Fix: {declared.fix}")
        else:
            # the problem and the fix, never the value: a file's contents are not echoed (docs/pipeline-config.md)
            lines.append(f"  field `{field}`: {err['msg']}. Fix: see docs/pipeline-config.md")
    return lines
