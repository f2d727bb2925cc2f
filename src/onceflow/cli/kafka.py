"""`onceflow kafka start | stop | status | logs`: the embedded broker (KRaft, one node)."""

from __future__ import annotations

import json

from onceflow.cli.console import log, out


def add_parser(sub) -> None:
    p = sub.add_parser("kafka", help="the embedded Kafka broker (KRaft, one node)")
    p.add_argument("action", choices=["start", "stop", "status", "logs"])
    p.add_argument("--port", type=int, help="client port (default 9092 or ONCEFLOW_KAFKA_PORT)")
    p.add_argument("--timeout", type=float, default=90, help="seconds to wait for start-up")
    p.add_argument("--lines", type=int, default=50, help="log lines to show (logs)")
    p.add_argument("--json", action="store_true", help="status as JSON")
    p.set_defaults(func=cmd_kafka)


def cmd_kafka(args) -> int:
    from onceflow.kafka.broker import LocalBroker

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
