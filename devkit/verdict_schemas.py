"""The verdict enums of the published JSON Schemas, generated from onceflow.verdicts.SCHEMA_ENUMS.

`python -m devkit.verdict_schemas` rewrites each schema's `"verdict": {"enum": [...]}` in place;
tests/unit/test_verdicts.py fails while a file differs from what this would write, so a verdict
added to `Verdict` cannot be missing from a schema the sensors and the page are validated by.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from onceflow.verdicts import SCHEMA_ENUMS

SCHEMAS = Path(__file__).resolve().parents[1] / "docs" / "schemas"
# the one verdict enum of each of these files (the error branch of the trigger's event is a const)
_ENUM = re.compile(r'("verdict": \{"enum": )\[[^\]]*\]')


def generated(name: str, text: str) -> str:
    """`text` (schema file `name`) with its verdict enum as SCHEMA_ENUMS says."""
    found = _ENUM.findall(text)
    if len(found) != 1:
        raise ValueError(f'docs/schemas/{name}: expected one `"verdict": {{"enum": [...]}}`, found {len(found)}')
    values = json.dumps([str(v) for v in SCHEMA_ENUMS[name]])
    return _ENUM.sub(lambda m: m.group(1) + values, text)


def main() -> None:
    for name in SCHEMA_ENUMS:
        path = SCHEMAS / name
        text = path.read_text()
        new = generated(name, text)
        if new != text:
            path.write_text(new)
            print(f"rewrote {path}")


if __name__ == "__main__":
    main()
