"""onceflow DAGs: for each pipelines/*.yaml, <name>_stream, _batch, _audit, _recover and _backfill.

The pipeline files describe the pipelines; the DAG shapes live in
onceflow.airflow.dag_factory (docs/airflow.md). A pipeline file that does not
validate shows up as its own DAG, invalid_pipeline_<file>, naming the file, the
field and the fix; the other pipelines keep their DAGs.
"""

from onceflow.airflow.dag_factory import build_dags

globals().update(build_dags())
