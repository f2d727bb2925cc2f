"""spark-submit entry point of the streaming job (logic: onceflow.spark.ingest).

    spark-submit [--master ...] [--conf spark.jars=...] spark_apps/ingest.py \
        --pipeline pipelines/payments.yaml --mode continuous --max-seconds 3600
"""

import sys

from onceflow.cli import main

if __name__ == "__main__":
    sys.exit(main(["ingest", *sys.argv[1:]]))
