"""What reading Avro and Protobuf costs the job: the same events as Avro (two schema versions, a
real registry), as Protobuf (two versions too) and as JSON, each through the job's parse, and Avro
through a hand-written Spark job.

(a) onceflow on Avro: the job's path for an avro pipeline, `spark/avro.with_views` (from_avro per
    schema id, the JSON view, the byte-exact round trip) then `spark/parse.parse_events` (every
    check and rule, as for JSON);
(b) onceflow on JSON: `parse_events` on the same events written as JSON text;
(d) onceflow on Protobuf: the job's path for a protobuf pipeline, `spark/protobuf.with_protobuf_views`
    (a pandas UDF decoding each payload with the protobuf runtime into its view) then
    `parse_events`;
(c) a hand-written job: `from_avro` on the payload after the 5-byte header, one branch per schema
    id, each read as the latest version (from_avro's `avroSchema`), its columns selected: no
    validation, no quarantine, what a team writes by hand when it trusts its producers (and what
    loses a record's bytes when it is bad).

No Kafka: a DataFrame of raw values (the records repeated to the asked count), cached, each side
ending in a `groupBy(reason).count()` (for (c), a count of every column per schema id) so the whole
parse runs. The
sides alternate in one JVM after a warm-up; the figures are the rounds' medians and ratios.

    python benchmarks/avro_parse_cost.py --records 500000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from harness import emit


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args(argv)

    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    from devkit.pipelines import PAYMENTS_SCHEMA_BODY
    from onceflow.generate.avro_events import RegistryEvents, register_writers
    from onceflow.generate.protobuf_events import register_proto_writers
    from onceflow.generate.records import Generator
    from onceflow.local.registry import LocalRegistry
    from onceflow.local.service import free_port
    from onceflow.registry import Registry
    from onceflow.schema.model import RegistrySpec, Schema
    from onceflow.spark import parse
    from onceflow.spark.avro import with_views
    from onceflow.spark.framed import payload, schema_id
    from onceflow.spark.protobuf import with_protobuf_views
    from onceflow.spark.session import build_session

    fields = [*PAYMENTS_SCHEMA_BODY["fields"], {"name": "channel", "type": "string", "required": False}]
    schema = Schema.model_validate({**PAYMENTS_SCHEMA_BODY, "fields": fields})
    with tempfile.TemporaryDirectory(prefix="onceflow-bench-avro-") as home:
        server = LocalRegistry(home=Path(home), port=free_port())
        server.start(timeout=120)
        try:
            registry = Registry(RegistrySpec(url=server.url))
            avro_schema = Schema.model_validate(
                {**PAYMENTS_SCHEMA_BODY, "fields": fields, "format": "avro", "registry": {"url": server.url}}
            )
            subject = "bench-payments-value"
            writers = register_writers(registry, subject, schema, "payments", malformed=False)
            sample = min(args.records, 50_000)
            # one event drawn, written both ways: the same values in Avro and in JSON
            avro_events = RegistryEvents(Generator(schema, seed=1, group_by=("account_id",)), writers, sample // 2)
            json_gen = Generator(schema, seed=1, group_by=("account_id",), large_ratio=0.0)
            avro_values = [avro_events.record(0.0).value for _ in range(sample)]
            json_values = [json_gen.record(0.0).value for _ in range(sample)]  # draws as RegistryEvents.record
            pb_subject = "bench-payments-pb-value"
            pb_writers = register_proto_writers(registry, pb_subject, schema, "payments", malformed=False)
            pb_events = RegistryEvents(Generator(schema, seed=1, group_by=("account_id",)), pb_writers, sample // 2)
            pb_values = [pb_events.record(0.0).value for _ in range(sample)]
            pb_schema = avro_schema.model_copy(update={"format": "protobuf"})

            spark = build_session("onceflow-bench-avro-parse", master="local[2]")
            now = datetime(2026, 1, 1, tzinfo=UTC)
            columns = (
                "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
                "timestampType int"
            )
            copies = max(1, args.records // sample)

            def frame_of(values: list[bytes]):
                base = spark.createDataFrame([(None, v, "t", 0, i, now, 0) for i, v in enumerate(values)], columns)
                return base.crossJoin(spark.range(copies).select(F.col("id").alias("_c"))).drop("_c").cache()

            raw_avro, raw_json, raw_pb = frame_of(avro_values), frame_of(json_values), frame_of(pb_values)
            total = raw_avro.count()
            assert raw_json.count() == total == raw_pb.count()

            def onceflow_avro() -> list:
                views = with_views(raw_avro, registry, subject)
                return parse.parse_events(views, avro_schema).groupBy("reason").count().collect()

            def onceflow_json() -> list:
                return parse.parse_events(raw_json, schema).groupBy("reason").count().collect()

            def onceflow_protobuf() -> list:
                views = with_protobuf_views(raw_pb, registry, pb_subject)
                return parse.parse_events(views, pb_schema).groupBy("reason").count().collect()

            def hand_written() -> list:
                sid = schema_id()
                latest = json.dumps(writers.evolved.schema)  # every version read as the latest (Avro resolution)
                decoded = from_avro(payload(), json.dumps(writers.first.schema), {"avroSchema": latest})
                branch = from_avro(payload(), latest, {"avroSchema": latest})
                decoded = F.when(sid == writers.evolved.schema_id, branch).otherwise(decoded)
                rows = raw_avro.select(sid.alias("sid"), decoded.alias("r")).select("sid", "r.*")
                # every column counted: a count of rows alone lets Spark prune the decoding away
                return rows.groupBy("sid").agg(F.count("*"), *(F.count(f["name"]) for f in fields)).collect()

            sides = {
                "onceflow_avro": onceflow_avro,
                "onceflow_json": onceflow_json,
                "hand_written_avro": hand_written,
                "onceflow_protobuf": onceflow_protobuf,
            }
            checks = {name: side() for name, side in sides.items()}  # warm-up, and every record read as valid
            valid = [(None, total)]
            assert checks["onceflow_avro"] == checks["onceflow_json"] == checks["onceflow_protobuf"] == valid, checks
            assert sum(r[1] for r in checks["hand_written_avro"]) == total

            rounds = []
            for _ in range(args.rounds):
                times = {}
                for name, side in sides.items():
                    started = time.monotonic()
                    side()
                    times[name] = round(time.monotonic() - started, 3)
                rounds.append(
                    {
                        **times,
                        "avro_over_json": round(times["onceflow_avro"] / times["onceflow_json"], 3),
                        "avro_over_hand_written": round(times["onceflow_avro"] / times["hand_written_avro"], 3),
                        "protobuf_over_json": round(times["onceflow_protobuf"] / times["onceflow_json"], 3),
                    }
                )
            median = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
            emit(
                {
                    "records": total,
                    "schema_versions": 2,
                    "rounds": rounds,
                    "median_s": {k: median[k] for k in sides},
                    "records_per_s": {k: round(total / median[k]) for k in sides},
                    "median_ratio_avro_over_json": median["avro_over_json"],
                    "median_ratio_avro_over_hand_written": median["avro_over_hand_written"],
                    "median_ratio_protobuf_over_json": median["protobuf_over_json"],
                },
                args.json,
            )
            spark.stop()
        finally:
            server.stop()


if __name__ == "__main__":
    main()
