#!/usr/bin/env python3
"""Container healthcheck: GET a URL, optionally check fields of its JSON answer.

    onceflow-healthcheck http://localhost:8080/json/ --expect status=ALIVE
    onceflow-healthcheck http://localhost:8081/json/ --expect masterwebuiurl

`--expect KEY=VALUE` needs the (dotted) key to equal VALUE; `--expect KEY` needs
it present and non-empty. Exit 0 when healthy, 1 with one line saying why not.
Standard library only, so the image needs no curl; used by docker/compose.yaml
and, against a real Spark master and worker, by tests/integration.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request


def field(document: object, dotted: str) -> object:
    """document['a']['b'] for 'a.b'; KeyError names the missing part."""
    value = document
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(part)
        value = value[part]
    return value


def check(url: str, expects: list[str], timeout: float) -> str | None:
    """None when healthy, else the reason."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        return f"{url} answered HTTP {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        return f"{url} is not answering ({getattr(exc, 'reason', exc)})"
    if not expects:
        return None
    try:
        document = json.loads(body)
    except ValueError:
        return f"{url} did not answer JSON"
    for expect in expects:
        key, sep, wanted = expect.partition("=")
        try:
            value = field(document, key)
        except KeyError as missing:
            return f"{url}: no field {key!r} (missing {missing})"
        if sep and str(value) != wanted:
            return f"{url}: {key} is {value!r}, expected {wanted!r}"
        if not sep and value in (None, "", [], {}):
            return f"{url}: {key} is empty"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--expect", action="append", default=[], metavar="KEY[=VALUE]")
    parser.add_argument("--timeout", type=float, default=5.0)
    args = parser.parse_args(argv)
    problem = check(args.url, args.expect, args.timeout)
    if problem:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
