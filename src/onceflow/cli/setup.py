"""`onceflow setup`: resolve the JVM jars (broker, Spark connectors) once, archive the Spark
driver's classes so that drivers start sooner (onceflow.spark.class_archive), and build the native
library: the audit's compiled judge and Kafka reader (onceflow.native; skipped, said, without Rust)."""

from __future__ import annotations

import argparse

from onceflow.cli.console import log


def add_parser(sub) -> None:
    p = sub.add_parser("setup", help="resolve the JVM jars (broker, Spark connectors) once")
    p.add_argument("--force", action="store_true", help="resolve again even if up to date")
    p.add_argument(
        "--only",
        type=_classpaths,
        default=None,
        metavar="NAME[,NAME]",
        help="resolve only these classpaths (of: kafka, spark, s3proxy, registry); default: all",
    )
    p.set_defaults(func=cmd_setup)


def _classpaths(text: str) -> tuple[str, ...]:
    """`--only`'s names, each one of jvm.CLASSPATHS."""
    from onceflow import jvm

    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in jvm.CLASSPATHS]
    if unknown or not names:
        choices = ", ".join(jvm.CLASSPATHS)
        raise argparse.ArgumentTypeError(f"{unknown or text!r}: not a classpath; choose from {choices}")
    return names


def cmd_setup(args) -> int:
    from onceflow import jvm

    jvm.check_versions()
    jvm.resolve(args.only or jvm.CLASSPATHS, force=args.force, log=log)
    from onceflow.spark import class_archive

    class_archive.build(log=log, force=args.force)
    if args.only is None:
        from onceflow import native

        native.build(log=log)
    return 0
