"""`onceflow setup`: resolve the JVM jars (broker, Spark connectors) once, and archive the
Spark driver's classes so that drivers start sooner (onceflow.spark.class_archive)."""

from __future__ import annotations

from onceflow.cli.console import log


def add_parser(sub) -> None:
    p = sub.add_parser("setup", help="resolve the JVM jars (broker, Spark connectors) once")
    p.add_argument("--force", action="store_true", help="resolve again even if up to date")
    p.set_defaults(func=cmd_setup)


def cmd_setup(args) -> int:
    from onceflow import jvm

    jvm.check_versions()
    jvm.resolve(force=args.force, log=log)
    from onceflow.spark import class_archive

    class_archive.build(log=log, force=args.force)
    return 0
