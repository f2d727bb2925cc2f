"""`onceflow s3 start | stop | status | env | logs`: a local S3 API server (S3Proxy) for tests and demos.

`onceflow s3 serve --bind 0.0.0.0 --port 9000 --bucket B` runs it in the foreground with the keys of
AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (a container's main process: the docker stack's `s3`).

`eval "$(onceflow s3 env)"` points every onceflow command of the shell at it; pipelines then
name `s3://onceflow/...` paths, or set ONCEFLOW_DATA_ROOT=s3://onceflow/lake (docs/storage.md)."""

from __future__ import annotations

import json
import shlex

from onceflow.cli.console import log, out


def add_parser(sub) -> None:
    p = sub.add_parser("s3", help="a local S3 API server (S3Proxy) for tests and demos")
    p.add_argument("action", choices=["start", "stop", "status", "env", "logs", "serve"])
    p.add_argument("--port", type=int, help="port (default: the last one used, else a free one)")
    p.add_argument("--bind", default="127.0.0.1", help="serve: the address to listen on (0.0.0.0 in a container)")
    p.add_argument("--bucket", default="onceflow", help="serve: the bucket to create and serve")
    p.add_argument("--timeout", type=float, default=60, help="seconds to wait for start-up")
    p.add_argument("--lines", type=int, default=50, help="log lines to show (logs)")
    p.add_argument("--json", action="store_true", help="status as JSON")
    p.set_defaults(func=cmd_s3)


def cmd_s3(args) -> int:
    from onceflow.local.s3 import LocalS3

    server = LocalS3(port=args.port)
    if args.action == "serve":
        import os

        server.serve(
            args.bind, args.bucket, os.environ.get("AWS_ACCESS_KEY_ID", ""), os.environ.get("AWS_SECRET_ACCESS_KEY", "")
        )
    if args.action == "start":
        status = server.start(timeout=args.timeout, log=log)
        out.print(f"S3 server ready at {status.endpoint} (pid {status.pid}); bucket s3://{status.bucket}")
        out.print('point this shell at it: eval "$(onceflow s3 env)"')
    elif args.action == "stop":
        out.print("S3 server stopped" if server.stop() else "S3 server was not running")
    elif args.action == "status":
        status = server.status()
        if args.json:
            out.print_json(json.dumps(status.__dict__))
        else:
            state = f"ready (pid {status.pid})" if status.ready else "stopped" if not status.running else "starting"
            out.print(f"S3 server: {state}; endpoint {status.endpoint}; bucket s3://{status.bucket}")
        return 0 if status.ready else 1
    elif args.action == "env":
        # for `eval`: what a shell needs to reach the server (its own generated, local-only credentials)
        print("\n".join(f"export {k}={shlex.quote(v)}" for k, v in server.env().items()))
    elif args.action == "logs":
        out.print(server.logs(args.lines), markup=False)
    return 0
