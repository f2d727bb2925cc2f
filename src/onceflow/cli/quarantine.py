"""`onceflow quarantine --pipeline P --batch N | --start-offsets JSON --end-offsets JSON`:
move offsets the job cannot process to quarantine by hand (onceflow.state.unprocessable)."""

from __future__ import annotations

import json

from onceflow.cli.console import out
from onceflow.config import DEFAULT_PIPELINE


def add_parser(sub) -> None:
    p = sub.add_parser(
        "quarantine",
        help="move offsets the job cannot process (a poisoned batch) to quarantine by hand, raw bytes kept",
    )
    p.add_argument("--pipeline", default=DEFAULT_PIPELINE, help="a pipeline name or YAML path")
    p.add_argument("--batch", type=int, help="the batch `checkpoint status` names as poisoned: its offsets")
    p.add_argument("--start-offsets", help='instead of --batch: first offset per partition, e.g. {"0": 120}')
    p.add_argument("--end-offsets", help='with --start-offsets: the offset after the last, e.g. {"0": 121}')
    p.add_argument("--note", default="", help="why (kept with the decision, shown in the quarantine's detail)")
    p.add_argument("--json", action="store_true", help="print the recorded decision as JSON")
    p.set_defaults(func=cmd_quarantine, check=check_args)


def check_args(args) -> None:
    from onceflow.errors import RangeError
    from onceflow.ranges import offset_range

    if (args.batch is None) == (args.start_offsets is None):
        raise RangeError("give either --batch N or --start-offsets/--end-offsets (one of the two)")
    if args.start_offsets is not None:
        args.start_offsets, args.end_offsets = offset_range(
            args.start_offsets, args.end_offsets, "--start-offsets", "--end-offsets"
        )


def cmd_quarantine(args) -> int:
    from onceflow import config
    from onceflow.recovery.quarantine import declare_unprocessable

    pipeline = config.load_pipeline(args.pipeline)
    if args.batch is not None:
        declared = declare_unprocessable(pipeline, batch_id=args.batch, note=args.note)
    else:
        declared = declare_unprocessable(pipeline, start=args.start_offsets, end=args.end_offsets, note=args.note)
    if args.json:
        out.print_json(json.dumps(declared.as_dict()))
        return 0
    spans = ", ".join(f"partition {p} [{a}, {b})" for p, (a, b) in sorted(declared.ranges.items()))
    out.print(
        f"{pipeline.name}: {spans} of {declared.topic} go to quarantine as `unprocessable` (raw bytes kept) "
        f"from the next run on. Start the job again (`onceflow ingest`, or let the stream DAG run); the "
        "audit expects them there."
    )
    return 0
