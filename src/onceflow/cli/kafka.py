"""`onceflow kafka start | stop | status | logs`: the embedded broker (KRaft, one node);
`onceflow kafka create-topic --pipeline P [--partitions N]`: a pipeline's source topic, created
for producers of one's own (`onceflow produce` creates it too, when it writes the first events)."""

from __future__ import annotations

import json

from onceflow.cli.console import log, number, out


def add_parser(sub) -> None:
    p = sub.add_parser("kafka", help="the embedded Kafka broker (KRaft, one node)")
    p.add_argument("action", choices=["start", "stop", "status", "logs", "create-topic"])
    p.add_argument("--port", type=int, help="client port (default 9092 or ONCEFLOW_KAFKA_PORT)")
    p.add_argument(
        "--brokers",
        type=number("--brokers", minimum=1, what="the node count"),
        default=1,
        help="start | stop | status: 3 or more runs a replicated KRaft cluster on free ports "
        "(replication factor N, min.insync.replicas N-1) in <state>/kafka-cluster",
    )
    p.add_argument(
        "--pipeline", help="create-topic: a pipeline name or YAML path; its source topic on its bootstrap servers"
    )
    p.add_argument(
        "--partitions",
        type=number("--partitions", minimum=1, what="the partition count"),
        default=4,
        help="create-topic: partitions of the topic, if it is created (default 4)",
    )
    p.add_argument("--timeout", type=float, default=90, help="seconds to wait for start-up")
    p.add_argument("--lines", type=int, default=50, help="log lines to show (logs)")
    p.add_argument("--json", action="store_true", help="status as JSON")
    p.set_defaults(func=cmd_kafka, check=check_args)


def check_args(args) -> None:
    from onceflow.errors import ConfigError

    if (args.action == "create-topic") != (args.pipeline is not None):
        raise ConfigError(
            "--pipeline goes with create-topic (the pipeline whose source topic to create), and only with it. "
            "Fix: `onceflow kafka create-topic --pipeline NAME_OR_FILE [--partitions N]`"
        )


def cmd_kafka(args) -> int:
    from onceflow.kafka.broker import LocalBroker

    if args.action == "create-topic":
        return create_topic(args.pipeline, args.partitions)

    if args.brokers > 1:
        return cmd_cluster(args)
    broker = LocalBroker(port=getattr(args, "port", None))
    if args.action == "start":
        status = broker.start(timeout=args.timeout, log=log)
        out.print(f"Kafka broker ready on {status.bootstrap} (pid {status.pid}); data in {status.data_dir}")
    elif args.action == "stop":
        was = broker.stop(log=log)
        out.print("Kafka broker stopped" if was else "Kafka broker was not running")
    elif args.action == "status":
        status = broker.status()
        if args.json:
            out.print_json(json.dumps(status.__dict__))
        else:
            state = (
                ("ready" if status.ready else "running, not answering") + f" (pid {status.pid})"
                if status.running
                else "stopped"
            )
            out.print(f"Kafka broker: {state}; bootstrap {status.bootstrap}; log {status.log_file}")
            if not status.running:
                out.print("start it with `onceflow kafka start`")
        return 0 if status.ready else 1
    elif args.action == "logs":
        out.print(broker.logs(args.lines), markup=False)
    return 0


def cmd_cluster(args) -> int:
    """start | stop | status of the replicated cluster (`--brokers N`, N >= 3)."""
    from onceflow.kafka.broker import LocalCluster

    cluster = LocalCluster(nodes=args.brokers)
    if args.action == "start":
        bootstrap = cluster.start(timeout=args.timeout, log=log)
        out.print(f"{args.brokers}-node Kafka cluster ready: {bootstrap}")
        out.print(f"point a pipeline at it: export ONCEFLOW_KAFKA_BOOTSTRAP={bootstrap}")
    elif args.action == "stop":
        cluster.stop(log=log)
        out.print("Kafka cluster stopped")
    elif args.action == "status":
        states = [n.status() for n in cluster.nodes]
        for i, s in enumerate(states, start=1):
            out.print(f"node {i}: {'ready' if s.ready else 'running' if s.running else 'stopped'} on {s.bootstrap}")
        return 0 if all(s.ready for s in states) else 1
    else:
        out.print(f"`onceflow kafka {args.action}` is for the single broker; a cluster node's log is in {cluster.dir}")
        return 2
    return 0


def create_topic(spec: str, partitions: int) -> int:
    """The pipeline's source topic on its bootstrap servers: created with `partitions` partitions,
    or, when it exists, left as it is (its partitions are said)."""
    from onceflow import config
    from onceflow.kafka.admin import ensure_topic, partitions_of, require_broker
    from onceflow.kafka.client import source_client

    pipeline = config.load_pipeline(spec)
    cluster, topic = source_client(pipeline), pipeline.source.topic
    require_broker(cluster, file=pipeline.file)
    if ensure_topic(cluster, topic, partitions, at_least=False):
        out.print(f"created topic {topic} with {partitions} partitions on {cluster.describe()}")
    else:
        have = len(partitions_of(cluster, topic))
        out.print(f"topic {topic} exists on {cluster.describe()} with {have} partitions; left as it is")
    return 0
