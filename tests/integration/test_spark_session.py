"""Spark writes nothing in the directory a command runs from: its warehouse and the
`artifacts/` a Spark 4.0 JVM leaves behind go under the state dir (real JVM)."""

from __future__ import annotations

from pathlib import Path


def test_the_jvm_works_in_the_state_dir_and_the_warehouse_is_there(spark, state_home):
    spark.range(10).selectExpr("sum(id)").collect()
    # whatever the JVM leaves in its working directory (Spark 4.0 made artifacts/ there at the first
    # job; 4.2 makes it when a session adds artifacts) lands in the state dir, not the checkout
    jvm_cwd = Path(spark.sparkContext._jvm.java.lang.System.getProperty("user.dir"))
    assert jvm_cwd == state_home / "spark"
    assert spark.conf.get("spark.sql.warehouse.dir").endswith(str(state_home / "spark" / "warehouse"))
    assert Path.cwd() != jvm_cwd  # the Python process is back where it was
