"""spark-submit entry point of the audit (logic: onceflow.reconcile, onceflow.audit).

    spark-submit [--master ...] [--conf spark.jars=...] spark_apps/audit.py \
        --pipeline pipelines/payments.yaml [--full | --since-last] [--report-dir reports]

Exit code 0: passed, 1: a data problem was found, 2: the audit could not run.
"""

import sys

from onceflow.cli import main

if __name__ == "__main__":
    sys.exit(main(["audit", *sys.argv[1:]]))
