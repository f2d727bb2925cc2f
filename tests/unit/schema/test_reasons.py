"""The rejection reasons: one StrEnum, every member in exactly one check order."""

from __future__ import annotations

import pytest

from onceflow.schema import reasons
from onceflow.schema.reasons import CDC_REASONS, REASONS, Reason


def test_every_reason_is_in_one_order_but_the_operators():
    """A new member must take its place in the order the job and the audit's judge check in."""
    ordered = [*REASONS, *CDC_REASONS]
    assert len(ordered) == len(set(ordered))
    assert set(Reason) - set(ordered) == {Reason.UNPROCESSABLE}  # given by hand, never by validation


def test_codes_stay_their_text():
    """Codes are data in the quarantine table: a member is its plain text."""
    assert Reason.OVERSIZED == "oversized" and f"{Reason.CDC_MISSING_OP}" == "cdc_missing_op"


def test_the_module_names_members_for_the_generators():
    assert reasons.OVERSIZED is Reason.OVERSIZED
    with pytest.raises(AttributeError, match="no attribute 'NOT_A_REASON'"):
        reasons.NOT_A_REASON  # noqa: B018
