"""Local stand-ins: the servers a laptop, the tests and the demos start in place of a real cluster.

None of this is the product: no pipeline, job, audit, recovery or health check imports it
(.importlinter, contract `core-no-stand-ins`); only the `onceflow` command (`onceflow kafka`,
`onceflow s3`, `onceflow demo`), devkit/, the tests and the benchmarks do.

- broker.py: a real Apache Kafka (KRaft) from the Maven jars, one node or a cluster, plain or
  SASL_SSL with ACLs (`LocalBroker`, `LocalCluster`).
- tls.py: the CA and server certificates of the secured broker.
- s3.py: a real S3 API server, S3Proxy on a filesystem (`LocalS3`).
- airflow.py: Airflow standalone with the project's DAGs (`make airflow`,
  `python -m onceflow.local.airflow`).
"""
