"""`onceflow ingest`'s modes and bounds, as the command line takes them."""

from __future__ import annotations

import pytest

from onceflow.cli.app import build_parser
from onceflow.config import DEFAULT_STOP_TIMEOUT
from onceflow.state.status import IngestMode


def test_the_modes_and_their_default():
    parse = build_parser().parse_args
    args = parse(["ingest"])
    assert args.mode == IngestMode.AVAILABLE_NOW and args.stop_timeout == DEFAULT_STOP_TIMEOUT
    args = parse(["ingest", "--mode", "continuous", "--until-idle", "10", "--max-seconds", "60"])
    assert (args.mode, args.until_idle, args.max_seconds) == ("continuous", 10.0, 60.0)
    with pytest.raises(SystemExit):
        parse(["ingest", "--mode", "forever"])
    with pytest.raises(SystemExit):
        parse(["ingest", "--stop-timeout", "0"])
