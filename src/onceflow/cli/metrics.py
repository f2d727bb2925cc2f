"""`onceflow metrics`: pipelines' Prometheus metrics (onceflow.metrics), printed once or served."""

from __future__ import annotations

import threading

from onceflow.cli.console import number, out


def add_parser(sub) -> None:
    p = sub.add_parser("metrics", help="pipelines' Prometheus metrics, from their health (docs/operations.md)")
    p.add_argument(
        "--pipeline",
        action="append",
        metavar="P",
        help="a pipeline name or YAML path, again for more (default: every pipeline of the pipelines folder)",
    )
    p.add_argument(
        "--serve",
        type=number("--serve", minimum=1, what="the port"),
        metavar="PORT",
        help="serve them on http://HOST:PORT/metrics until stopped, instead of printing them once",
    )
    p.add_argument("--host", default="127.0.0.1", help="the address to serve on (default 127.0.0.1)")
    p.add_argument(
        "--report-dir", metavar="DIR", help="audit reports (default: $ONCEFLOW_REPORTS, else <state>/reports)"
    )
    p.set_defaults(func=cmd_metrics)


def cmd_metrics(args) -> int:
    from pathlib import Path

    from prometheus_client import generate_latest, start_http_server

    from onceflow.config import load_all, load_pipeline, pipelines_dir
    from onceflow.metrics import registry_of
    from onceflow.paths import reports_dir

    if args.pipeline:
        chosen = [load_pipeline(p) for p in args.pipeline]  # refused now, with the file, not at a scrape

        def pipelines():
            return chosen
    else:

        def pipelines():
            return load_all(pipelines_dir())  # read again at each scrape: a pipeline added is scraped

        pipelines()
    registry = registry_of(pipelines, Path(args.report_dir) if args.report_dir else reports_dir())
    if args.serve is None:
        out.print(generate_latest(registry).decode(), markup=False, end="")
        return 0
    server, thread = start_http_server(args.serve, addr=args.host, registry=registry)
    out.print(f"serving metrics on http://{args.host}:{args.serve}/metrics (Ctrl-C stops)", markup=False)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()
        thread.join()
    return 0
