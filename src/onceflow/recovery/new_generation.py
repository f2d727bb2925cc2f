"""A new writer generation: a fresh checkpoint that starts at the lowest committed point of all
sink ledgers, each sink skipping the rows it already holds (sink floors); what Kafka deleted in
between is refused, or with --accept-loss recorded as lost, by range (docs/recovery.md, cases 6-7)."""

from __future__ import annotations

from onceflow import offsets
from onceflow.recovery.cases import EARLIEST, ActionKind, Case, Decision
from onceflow.recovery.describe import offsets_text, start_hint
from onceflow.recovery.facts import Facts
from onceflow.recovery.plan import Action, Finding, LostRange, Plan


def kafka_behind(plan: Plan, f: Facts, past: dict[str, dict[int, int]]) -> Plan:
    """Refuse: committed offsets (`past`, by whom) lie beyond Kafka's end."""
    detail = "; ".join(f"{who} at {offsets_text(o)}" for who, o in past.items())
    text = (
        f"committed offsets are past Kafka's end ({detail}; Kafka ends at {offsets_text(f.kafka.latest)}): the topic "
        "was deleted and recreated, or the pipeline points at another cluster"
    )
    plan.findings.append(Finding(Case.KAFKA_BEHIND, text))
    return plan.refuse(
        Case.KAFKA_BEHIND,
        f"{text}. Recovery cannot map old offsets onto a new log. Fix: check "
        "source.bootstrap_servers and source.topic; if the topic was recreated on purpose, "
        "give the pipeline new tables and a new checkpoint.",
    )


def new_generation(plan: Plan, f: Facts, reason: str, fix_cmd: str, accept_loss: bool, stamp: str) -> Plan:
    """Plan a new generation for `reason`: its starting offsets and sink floors, the lost ranges, the
    old checkpoint moved aside to `<checkpoint>.broken-<stamp>`; or refuse (Kafka behind, loss
    without --accept-loss, whose fix is `fix_cmd`)."""
    ck, written, kafka = f.checkpoint, f.written, f.kafka
    newest = max((led.entries[-1].generation for led in written.values()), default=-1)
    plan.generation = max(newest, f.identity.generation if f.identity else -1) + 1
    plan.decision = Decision.NEW_GENERATION

    starting: dict[int, int] = {}
    lost_by_sink: dict[str, dict[int, tuple[int, int]]] = {}
    if written:
        origin: dict[int, int] = {}  # per partition, where the pipeline began reading
        for ledger in f.fed.values():
            for entry in ledger.entries:
                for p, o in entry.start.items():
                    origin[p] = min(origin.get(p, o), o)
        parts = sorted(origin)
        points = {n: {p: led.committed_offsets().get(p, origin[p]) for p in parts} for n, led in f.fed.items()}
        missing = [p for p in parts if p not in kafka.latest]
        past = {
            n: {p: o for p, o in pts.items() if p in kafka.latest and o > kafka.latest[p]} for n, pts in points.items()
        }
        past = {n: o for n, o in past.items() if o}
        if missing or past:
            if missing:
                past[f"partitions {missing} (absent from Kafka)"] = {p: origin[p] for p in missing}
            return kafka_behind(plan, f, past)
        resume = {p: min(pts[p] for pts in points.values()) for p in parts}
        for n, pts in points.items():
            for p, o in pts.items():
                low = kafka.earliest.get(p, 0)
                if o < low:
                    lost_by_sink.setdefault(n, {})[p] = (o, low)
        lost: dict[int, LostRange] = {}
        for n, ranges in lost_by_sink.items():
            for p, (start, end) in ranges.items():
                if p in lost:
                    lost[p] = LostRange(p, min(lost[p].start, start), end, [*lost[p].sinks, n])
                else:
                    lost[p] = LostRange(p, start, end, [n])
        plan.lost = [lost[p] for p in sorted(lost)]
        starting = {p: max(resume[p], kafka.earliest.get(p, 0)) for p in parts}
        for p in kafka.partitions:
            if p not in starting:
                starting[p] = EARLIEST
                if kafka.earliest.get(p, 0) > 0:
                    plan.findings.append(
                        Finding(
                            Case.RETENTION,
                            f"partition {p} appears in no sink ledger and its log starts at "
                            f"{kafka.earliest[p]}: the new generation reads it from there",
                        )
                    )
        plan.resume = dict(sorted(starting.items()))
        plan.starting_offsets = offsets.spark_json(f.topic, starting)
        plan.sink_floors = {n: offsets.as_json(pts) for n, pts in points.items()}
        if plan.lost:
            text = "; ".join(
                f"partition {r.partition}: offsets [{r.start}, {r.end}) = {r.count} offsets ({', '.join(r.sinks)})"
                for r in plan.lost
            )
            plan.findings.append(Finding(Case.RETENTION, f"Kafka deleted offsets the sinks have not got: {text}"))
            if not accept_loss:
                return plan.refuse(
                    Case.RETENTION,
                    f"Kafka no longer holds offsets the resume needs (retention deleted them "
                    f"before the sinks got them): {text}. They cannot be read again. Fix: if a "
                    "copy of those records exists, load it first; otherwise run "
                    f"`{fix_cmd} --accept-loss`, which records exactly these ranges as lost "
                    "in the sink ledgers (the audit shows them as accepted loss) and resumes "
                    "at Kafka's log start.",
                    override="--accept-loss",
                )

    if ck.exists or any(p.path == ck.path for p in ck.problems):  # a directory, or a file in its place
        aside = f"{ck.path}.broken-{stamp}"
        plan.actions.append(
            Action(
                ActionKind.MOVE_CHECKPOINT,
                f"move the checkpoint aside to {aside} (kept, never deleted)",
                {"from": ck.path, "to": aside},
            )
        )
    for n, ranges in lost_by_sink.items():
        ledger = f.ledgers[n]
        plan.actions.append(
            Action(
                ActionKind.WRITE_LOSS,
                f"record the loss in the {n} ledger: "
                + ", ".join(f"partition {p} [{a}, {b})" for p, (a, b) in sorted(ranges.items()))
                + ("" if ledger.exists else " (the table does not exist: kept in the recovery record only)"),
                {
                    "sink": n,
                    "table": ledger.table,
                    "generation": plan.generation,
                    "start": offsets.as_json({p: a for p, (a, b) in ranges.items()}),
                    "end": offsets.as_json({p: b for p, (a, b) in ranges.items()}),
                    "extra": {},
                },
            )
        )
    floors = ""
    resume = plan.resume or {}
    if plan.sink_floors and any(o > resume.get(int(p), o) for fl in plan.sink_floors.values() for p, o in fl.items()):
        floors = "; each sink keeps only rows from its own point: " + ", ".join(
            f"{n} {offsets_text(offsets.from_json(fl))}" for n, fl in plan.sink_floors.items()
        )
    plan.actions.append(
        Action(
            ActionKind.WRITE_IDENTITY,
            f"start generation {plan.generation} in a fresh checkpoint at {ck.path}, reading from "
            + (offsets_text(plan.resume) if plan.resume is not None else f.default_starting_offsets)
            + floors,
            {
                "checkpoint": ck.path,
                "generation": plan.generation,
                "starting_offsets": plan.starting_offsets,
                "reason": reason,
                "sink_floors": plan.sink_floors,
            },
        )
    )
    if plan.resume is None:
        plan.summary = (
            f"new generation {plan.generation} ({reason}); no sink holds a batch, so it starts from "
            f"source.starting_offsets ({f.default_starting_offsets})"
        )
    else:
        if plan.lost:
            plan.summary = (
                f"new generation {plan.generation} ({reason}), resuming at Kafka's log start "
                f"{offsets_text(plan.resume)} where the sinks' committed point is no longer held"
            )
        else:
            plan.summary = (
                f"new generation {plan.generation} ({reason}), resuming at the lowest committed point "
                f"of the sink ledgers {offsets_text(plan.resume)}"
            )
        if any(x.case == Case.SINKS_DISAGREE for x in plan.findings):
            plan.summary += "; each sink skips the rows it already holds (sink floors)"
        if plan.lost:
            plan.summary += f"; {sum(r.count for r in plan.lost)} offsets accepted as lost"
    plan.next_step = start_hint(f)
    return plan
