"""`onceflow registry start | stop | status | env | logs`: a local schema registry (Apicurio) for
tests and demos, with the Confluent-compatible API pipelines in Avro read their schemas from.

`onceflow registry serve --bind 0.0.0.0 --port 8081` runs it in the foreground (a container's main
process). `eval "$(onceflow registry env)"` sets ONCEFLOW_REGISTRY_URL, which a pipeline names as
`schema.registry.url: ${ONCEFLOW_REGISTRY_URL}` (docs/registry.md)."""

from __future__ import annotations

import json
import shlex

from onceflow.cli.console import log, out


def add_parser(sub) -> None:
    p = sub.add_parser("registry", help="a local schema registry (Apicurio, Confluent-compatible API)")
    p.add_argument("action", choices=["start", "stop", "status", "env", "logs", "serve"])
    p.add_argument("--port", type=int, help="port (default: the last one used, else 8081 or $ONCEFLOW_REGISTRY_PORT)")
    p.add_argument("--bind", default="127.0.0.1", help="serve: the address to listen on (0.0.0.0 in a container)")
    p.add_argument("--timeout", type=float, default=90, help="seconds to wait for start-up")
    p.add_argument("--lines", type=int, default=50, help="log lines to show (logs)")
    p.add_argument("--json", action="store_true", help="status as JSON")
    p.set_defaults(func=cmd_registry)


def cmd_registry(args) -> int:
    from onceflow.local.registry import LocalRegistry

    registry = LocalRegistry(port=args.port)
    if args.action == "serve":
        registry.serve(args.bind)
    if args.action == "start":
        status = registry.start(timeout=args.timeout, log=log)
        out.print(f"schema registry ready at {status.url} (pid {status.pid})")
        out.print('point this shell at it: eval "$(onceflow registry env)"')
    elif args.action == "stop":
        out.print("schema registry stopped" if registry.stop() else "schema registry was not running")
    elif args.action == "status":
        status = registry.status()
        if args.json:
            out.print_json(json.dumps(status.__dict__))
        else:
            state = f"ready (pid {status.pid})" if status.ready else "stopped" if not status.running else "starting"
            out.print(f"schema registry: {state}; {status.url}")
        return 0 if status.ready else 1
    elif args.action == "env":
        print("\n".join(f"export {k}={shlex.quote(v)}" for k, v in registry.env().items()))
    elif args.action == "logs":
        out.print(registry.logs(args.lines), markup=False)
    return 0
