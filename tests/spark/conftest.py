"""One local SparkSession for the whole spark suite (local[2], UI off, 2 shuffle partitions)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    from tssb_spark.session import get_spark
    s = get_spark("local[2]", {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
    }, app="tssb-spark-tests")
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()
