"""tssb_spark: the Spark pipeline of the tinySSB toolkit.

  schema   the versioned event-log schema (schema/events-v*.json) and its rules
  session  SparkSession construction (local by default, any --master, spark-submit)
  ingest   JSONL -> Parquet (batch or Structured Streaming availableNow), quarantine, dedupe
  metrics  airtime/duty cycle, delivery per link, replication latency, GOSET convergence,
           host session stats
  report   HTML page with PNG plots (matplotlib)
  cli      `tssb-spark ingest|metrics|report`
"""

VERSION = "0.1.0"
