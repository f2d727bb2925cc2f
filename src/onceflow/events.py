"""The payments event: its fields, and the reason codes of malformed records.

Shared by the generator (which makes each malformed kind on purpose) and the
streaming job (which must quarantine each kind with exactly this reason).
"""

from __future__ import annotations

REQUIRED_FIELDS = ("event_id", "account_id", "amount", "currency", "event_time")
CURRENCIES = ("EUR", "USD", "GBP", "CHF", "JPY")
MAX_EVENT_BYTES = 16 * 1024

# reason codes written to quarantine; the generator's malformed kinds use the same names
INVALID_JSON = "invalid_json"
MISSING_FIELD = "missing_field"
WRONG_TYPE = "wrong_type"
NEGATIVE_AMOUNT = "negative_amount"
OVERSIZED = "oversized"
BAD_CURRENCY = "bad_currency"
INVALID_VALUE = "invalid_value"  # right type, unusable value: amount "abc", event_time "soon", event_id not a UUID
REASONS = (INVALID_JSON, MISSING_FIELD, WRONG_TYPE, NEGATIVE_AMOUNT, OVERSIZED, BAD_CURRENCY, INVALID_VALUE)
GENERATED_MALFORMED_KINDS = (INVALID_JSON, MISSING_FIELD, WRONG_TYPE, NEGATIVE_AMOUNT, OVERSIZED)
