"""SparkSession construction shared by the CLI, the report and the tests."""

APP_NAME = "tssb-spark"
# Every derived date/hour is UTC, whatever the machine's zone (event "ts" is epoch ms UTC).
SESSION_TZ = "UTC"


def get_spark(master=None, conf=None, app=APP_NAME):
    """Return the active SparkSession or build one.

    Args:
      master: Spark master URL (e.g. "local[2]", "spark://host:7077"). None keeps what
        spark-submit configured, or PySpark's default (local[*]) when run as plain Python.
      conf: dict of extra Spark settings (applied only when a new session is built).
      app: application name.
    Returns:
      The SparkSession, with the SQL session time zone set to UTC.
    """
    from pyspark.sql import SparkSession
    b = SparkSession.builder.appName(app)
    if master:
        b = b.master(master)
    for k, v in (conf or {}).items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.conf.set("spark.sql.session.timeZone", SESSION_TZ)
    return spark
