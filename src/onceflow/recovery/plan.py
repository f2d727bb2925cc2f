"""A recovery plan: what recovery found, what it decided and what it will do, and why.

Made by onceflow.recovery.decide (pure), carried out by onceflow.recovery.execute, kept in the
recovery record (`Plan.as_dict`; docs/schemas/recovery-record.schema.json).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from onceflow import offsets
from onceflow.recovery.cases import Decision


@dataclass
class Finding:
    case: str
    detail: str


@dataclass
class Action:
    kind: str
    description: str
    params: dict = field(default_factory=dict)


@dataclass
class LostRange:
    """Offsets [start, end) of one partition that Kafka deleted before the sinks named got them."""

    partition: int
    start: int
    end: int
    sinks: list[str]

    @property
    def count(self) -> int:
        return self.end - self.start


@dataclass
class Plan:
    pipeline: str
    pipeline_file: str
    topic: str
    checkpoint_path: str
    case: str  # the finding that decided
    decision: str
    summary: str  # one sentence: what recovery does
    findings: list[Finding]
    actions: list[Action]
    next_step: str | None = None
    refusal: str | None = None  # why it will not act, and the fix
    override: str | None = None  # the flag that lifts the refusal, if one does
    generation: int | None = None  # the writer generation of the next run
    previous_generation: int | None = None
    resume: dict[int, int] | None = None  # where the next run starts, per partition (-2: log start)
    starting_offsets: str | None = None  # Kafka startingOffsets JSON of a new generation
    sink_floors: dict[str, dict[str, int]] | None = None
    lost: list[LostRange] = field(default_factory=list)
    force: bool = False
    accept_loss: bool = False
    facts: dict = field(default_factory=dict)  # what was read, for the record

    @property
    def refused(self) -> bool:
        return self.decision == Decision.REFUSE

    def refuse(self, case: str, why: str, override: str | None = None) -> Plan:
        """Refuse, changing nothing: `why` says why and the fix, `override` names the flag that
        lifts the refusal, if one does. Returns the plan."""
        self.case, self.decision, self.refusal, self.override = case, Decision.REFUSE, why, override
        self.actions, self.next_step = [], None
        self.summary = f"refused ({case}): nothing was changed"
        return self

    def as_dict(self) -> dict:
        d = asdict(self)
        d["resume"] = offsets.as_json(self.resume)
        d["lost"] = [{**asdict(r), "count": r.count} for r in self.lost]
        return d
