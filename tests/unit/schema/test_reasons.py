"""The rejection reasons: one StrEnum, every member in exactly one check order."""

from __future__ import annotations

from onceflow.schema.reasons import (
    AVRO_REASONS,
    CDC_REASONS,
    FRAMED_REASONS,
    JSON_SCHEMA_REASONS,
    PROTOBUF_REASONS,
    REASONS,
    Reason,
)


def test_every_reason_is_in_one_order_but_the_operators():
    """A new member must take its place in the order the job and the audit's judge check in."""
    ordered = [*REASONS, *AVRO_REASONS, *JSON_SCHEMA_REASONS, *PROTOBUF_REASONS, *CDC_REASONS]
    assert len(ordered) == len(set(ordered))
    assert set(Reason) - set(ordered) == {Reason.UNPROCESSABLE}  # given by hand, never by validation


def test_codes_stay_their_text():
    """Codes are data in the quarantine table: a member is its plain text."""
    assert Reason.OVERSIZED == "oversized" and f"{Reason.CDC_MISSING_OP}" == "cdc_missing_op"


def test_each_registry_format_has_its_header_reasons():
    """The job and the judge take a framed format's header checks from one table."""
    from onceflow.schema.model import REGISTRY_FORMATS

    assert set(FRAMED_REASONS) == set(REGISTRY_FORMATS)
    assert all(r.value.startswith(f"{fmt}_") for fmt, rs in FRAMED_REASONS.items() for r in rs)
