"""Where a table or checkpoint lives and how each engine reaches it (docs/storage.md).

One place answers for every reader and writer: the URI Spark takes (`s3a://`), the one
delta-rs, pyarrow and obstore take (`s3://`), the Hadoop settings, a `pyarrow.fs` file
system for the files onceflow reads itself (checkpoints), the per-table commit lock that
keeps Spark's and delta-rs's commits apart on S3, and the store's put-if-absent, which the
pipeline's driver lease and the start-up probe rely on. Endpoint, region and credentials
come from the standard AWS environment variables (or an Airflow `aws` connection turned
into them), never from a file onceflow writes.
"""
