"""spark-submit entry point of the backfill (logic: onceflow.spark.backfill).

    spark-submit [--master ...] spark_apps/backfill.py --pipeline pipelines/payments.yaml \
        --start-offsets '{"0": 0}' --end-offsets '{"0": 100}'
"""

import sys

from onceflow.cli import main

if __name__ == "__main__":
    sys.exit(main(["backfill", *sys.argv[1:]]))
