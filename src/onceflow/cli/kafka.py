"""`onceflow kafka start | stop | status | logs`: the embedded broker (KRaft, one node);
`onceflow kafka start --secure [--pipeline P]`: the same broker with SASL_SSL (SCRAM-SHA-512), TLS
and ACLs, and a pipeline's topics and ACLs; `onceflow kafka env [--user U]`: the ONCEFLOW_KAFKA_*
exports that reach it (`eval "$(onceflow kafka env)"`);
`onceflow kafka create-topic --pipeline P [--partitions N]`: a pipeline's source topic, created
for producers of one's own (`onceflow produce` creates it too, when it writes the first events);
`onceflow kafka serve --secure --listener 9092=kafka:9092 [--pipeline P]`: the same broker in the
foreground, for a container (the docker stack's `kafka`)."""

from __future__ import annotations

import json
import shlex

from onceflow.cli.console import log, number, out


def add_parser(sub) -> None:
    p = sub.add_parser("kafka", help="the embedded Kafka broker (KRaft, one node)")
    p.add_argument("action", choices=["start", "stop", "status", "logs", "env", "create-topic", "serve"])
    p.add_argument("--port", type=int, help="client port (default 9092 or ONCEFLOW_KAFKA_PORT)")
    p.add_argument(
        "--secure",
        action="store_true",
        help="start: SASL_SSL (SCRAM-SHA-512) with a CA of its own, and ACLs; users admin, onceflow (pipelines) "
        "and producer (`onceflow produce`), their settings in <state>/kafka/secure/credentials.json",
    )
    p.add_argument("--user", default="onceflow", help="env: the user of a secure broker to export (default onceflow)")
    p.add_argument(
        "--brokers",
        type=number("--brokers", minimum=1, what="the node count"),
        default=1,
        help="start | stop | status: 3 or more runs a replicated KRaft cluster on free ports "
        "(replication factor N, min.insync.replicas N-1) in <state>/kafka-cluster; start also brings back "
        "the nodes of a running cluster that stopped, leaving the others as they are",
    )
    p.add_argument(
        "--pipeline",
        action="append",
        help="create-topic: a pipeline name or YAML path; its source topic on its bootstrap servers. "
        "start --secure: its topics, created as admin, and its ACLs granted to onceflow and producer. "
        "Repeat it for several pipelines",
    )
    p.add_argument(
        "--partitions",
        type=number("--partitions", minimum=1, what="the partition count"),
        default=4,
        help="create-topic: partitions of the topic, if it is created (default 4)",
    )
    p.add_argument(
        "--listener",
        action="append",
        default=[],
        metavar="PORT=HOST:ADVERTISED_PORT",
        help="serve: a client listener bound on every interface at PORT, advertised as HOST:ADVERTISED_PORT "
        "(repeat it; the first one carries inter-broker traffic)",
    )
    p.add_argument(
        "--ready-file", help="serve: written once the broker answers and the pipeline's topics and ACLs exist"
    )
    p.add_argument("--ca-out", help="serve --secure: where to copy the broker's CA certificate, for clients")
    p.add_argument("--timeout", type=float, default=90, help="seconds to wait for start-up")
    p.add_argument("--lines", type=int, default=50, help="log lines to show (logs)")
    p.add_argument("--json", action="store_true", help="status as JSON (a cluster's: its bootstrap and each node's)")
    p.set_defaults(func=cmd_kafka, check=check_args)


def check_args(args) -> None:
    from onceflow.errors import ConfigError

    secure_start = args.action in ("start", "serve") and args.secure
    if args.action == "serve" and not args.listener:
        raise ConfigError(
            "serve needs at least one --listener. Fix: e.g. `onceflow kafka serve --listener 9092=kafka:9092`"
        )
    if args.action != "serve" and (args.listener or args.ready_file or args.ca_out):
        raise ConfigError(
            "--listener, --ready-file and --ca-out go with serve. Fix: `onceflow kafka serve --listener ...`"
        )
    if (args.action == "create-topic" and args.pipeline is None) or (
        args.pipeline is not None and args.action != "create-topic" and not secure_start
    ):
        raise ConfigError(
            "--pipeline goes with create-topic (the pipeline whose source topic to create) or start --secure "
            "(the pipeline whose topics to create and ACLs to grant), and only with them. "
            "Fix: `onceflow kafka create-topic --pipeline NAME_OR_FILE [--partitions N]` or "
            "`onceflow kafka start --secure --pipeline NAME_OR_FILE`"
        )
    if args.secure and (args.action not in ("start", "serve") or args.brokers > 1):
        raise ConfigError(
            "--secure goes with start of the single broker (a secure one stays secure: stop, status and env "
            "know it). Fix: `onceflow kafka start --secure`"
        )
    if args.user != "onceflow" and args.action != "env":
        raise ConfigError("--user goes with env. Fix: `onceflow kafka env --user NAME`")


def cmd_kafka(args) -> int:
    from onceflow.local.broker import LocalBroker

    if args.action == "create-topic":
        return max(create_topic(spec, args.partitions) for spec in args.pipeline)

    if args.brokers > 1:
        return cmd_cluster(args)
    if args.action == "serve":
        return serve(args)
    # start says the mode (plain unless --secure); the other actions take the broker as it was made
    broker = LocalBroker(port=getattr(args, "port", None), secure=args.secure if args.action == "start" else None)
    if args.action == "start":
        status = broker.start(timeout=args.timeout, log=log)
        mode = "SASL_SSL, SCRAM-SHA-512, ACLs" if status.secure else "PLAINTEXT"
        out.print(f"Kafka broker ready on {status.bootstrap} ({mode}; pid {status.pid}); data in {status.data_dir}")
        if status.secure:
            out.print(
                f"users admin, onceflow (pipelines), producer (`onceflow produce`): their client settings in "
                f"{broker.credentials_file}; the CA {broker.ca_file}"
            )
            out.print('point this shell at it as onceflow: eval "$(onceflow kafka env)"')
            grant_each(broker, args.pipeline, args.partitions)
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
            mode = "secure (SASL_SSL, SCRAM-SHA-512, ACLs)" if status.secure else "plain (PLAINTEXT)"
            out.print(f"Kafka broker: {state}; bootstrap {status.bootstrap}; {mode}; log {status.log_file}")
            if not status.running:
                out.print("start it with `onceflow kafka start`")
        return 0 if status.ready else 1
    elif args.action == "env":
        # for `eval`: the one output that holds a password (the user's, from credentials.json)
        print(env_exports(broker.env(args.user)))
    elif args.action == "logs":
        out.print(broker.logs(args.lines), markup=False)
    return 0


def serve(args) -> int:
    """The broker in the foreground (a container's main process): its users' passwords from
    KAFKA_<USER>_PASSWORD when set (the stack's docker/.env), else generated; each pipeline's topics
    and ACLs once it answers; its exit code."""
    import os
    from pathlib import Path

    from onceflow.local.broker import SECURE_USERS, Listener, LocalBroker

    listeners = tuple(Listener.parse(text) for text in args.listener)
    passwords = {
        u: os.environ[f"KAFKA_{u.upper()}_PASSWORD"]
        for u in SECURE_USERS
        if os.environ.get(f"KAFKA_{u.upper()}_PASSWORD")
    }
    broker = LocalBroker(port=listeners[0].port, secure=args.secure)
    return broker.serve(
        listeners,
        passwords=passwords or None,
        ready_file=Path(args.ready_file) if args.ready_file else None,
        ca_out=Path(args.ca_out) if args.ca_out else None,
        on_ready=lambda b: grant_each(b, args.pipeline, args.partitions),  # check_args: --pipeline needs --secure
        timeout=args.timeout,
        log=log,
    )


def env_exports(env: dict[str, str]) -> str:
    """`export K=V ...` lines, shell-quoted, for `eval`."""
    return "\n".join(f"export {k}={shlex.quote(v)}" for k, v in env.items())


def grant_each(broker, specs: list[str] | None, partitions: int) -> None:
    """secure_pipeline for each pipeline `--pipeline` named (none: nothing)."""
    for spec in specs or ():
        secure_pipeline(broker, spec, partitions)


def secure_pipeline(broker, spec: str, partitions: int) -> None:
    """A pipeline on the secure broker: its topics made by admin, its ACLs granted to onceflow (the
    pipeline's) and producer (`onceflow produce`'s)."""
    from onceflow import config
    from onceflow.kafka.acls import secure_pipeline as grant

    pipeline = config.load_pipeline(spec)
    topics = grant(broker.client("admin"), pipeline, "onceflow", "producer", partitions=partitions)
    out.print(
        f"pipeline {pipeline.name}: topics {', '.join(topics)}; ACLs granted to User:onceflow (the pipeline's) "
        "and User:producer (`onceflow produce`'s): docs/kafka-security.md"
    )


def cmd_cluster(args) -> int:
    """start | stop | status of the replicated cluster (`--brokers N`, N >= 3)."""
    from onceflow.local.broker import LocalCluster

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
        ready = all(s.ready for s in states)
        if args.json:
            nodes = [{"node_id": i, **s.__dict__} for i, s in enumerate(states, start=1)]
            out.print_json(json.dumps({"bootstrap": cluster.bootstrap, "ready": ready, "nodes": nodes}))
            return 0 if ready else 1
        for i, s in enumerate(states, start=1):
            out.print(f"node {i}: {'ready' if s.ready else 'running' if s.running else 'stopped'} on {s.bootstrap}")
        if not ready:
            out.print(f"start its stopped nodes (running ones stay): onceflow kafka start --brokers {args.brokers}")
        return 0 if ready else 1
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
