"""SparkSession construction shared by the CLI, the report and the tests."""

APP_NAME = "tssb-spark"
# Every derived date/hour is UTC, whatever the machine's zone (event "ts" is epoch ms UTC).
SESSION_TZ = "UTC"
# The ingest's validation compiles into one large generated method per stage; HotSpot
# does not JIT methods over 8000 bytes of bytecode unless told to, and interpreting it
# made the ingest 2-3x slower (docs/spark.md). Applies where this process starts the JVM
# (plain Python, local mode) and to executors; spark-submit's driver needs
# --driver-java-options for local mode.
JIT_HUGE = "-XX:-DontCompileHugeMethods"
DEFAULTS = {"spark.driver.extraJavaOptions": JIT_HUGE,
            "spark.executor.extraJavaOptions": JIT_HUGE}


def _defaults():
    # Under spark-submit the JVM is up and holds the user's settings: extend them.
    import os
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return DEFAULTS
    from pyspark import SparkConf, SparkContext
    SparkContext._ensure_initialized()
    have = SparkConf()
    return merged_conf({k: have.get(k, "") for k in DEFAULTS}, DEFAULTS)


def merged_conf(base, conf):
    """`conf` over `base`, except JVM options, which are joined: a caller's `-D...` must
    not drop JIT_HUGE (or a user's own options)."""
    out = dict(base)
    for k, v in (conf or {}).items():
        cur = out.get(k, "")
        if k.endswith("JavaOptions") and cur:
            v = cur if v in cur else "%s %s" % (cur, v)
        out[k] = v
    return out


def get_spark(master=None, conf=None, app=APP_NAME):
    """Return the active SparkSession or build one.

    Args:
      master: Spark master URL (e.g. "local[2]", "spark://host:7077"). None keeps what
        spark-submit configured, or PySpark's default (local[*]) when run as plain Python.
      conf: dict of extra Spark settings (applied only when a new session is built),
        over DEFAULTS (JVM options joined with them, see merged_conf).
      app: application name.
    Returns:
      The SparkSession, with the SQL session time zone set to UTC.
    """
    from pyspark.sql import SparkSession
    b = SparkSession.builder.appName(app)
    if master:
        b = b.master(master)
    for k, v in merged_conf(_defaults(), conf).items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.conf.set("spark.sql.session.timeZone", SESSION_TZ)
    return spark
