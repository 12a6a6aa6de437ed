"""Ingest JSONL event logs into a Parquet lake, with quarantine and dedupe.

Lake layout (LAKE is the --output directory):
  LAKE/events/date=YYYY-MM-DD/node=NAME/*.parquet   valid events, one row per event id
  LAKE/quarantine/*.parquet                          bad lines: raw, source_file, reason(s)
  LAKE/_checkpoints/<input hash>/                    Structured Streaming checkpoint
  LAKE/_ingest_runs.jsonl                            one line of counts per ingest run

Lines are read as text (not with the JSON source) so the raw line and its file are always
at hand for the quarantine, and unknown keys are seen (the JSON source drops them
silently). Each line is parsed twice by Spark, with the explicit typed schema and as a
string map; comparing the two finds type errors, the map's keys find missing and unknown
fields. Validation is built only from Spark SQL expressions (no Python UDF), so a cluster's
executors need no project code.

Idempotence: valid rows are deduplicated on "id" within the batch and against the ids
already stored for the same dates (partition pruning; ids carry the node name and ts is
part of the event, so a repeated id lands on the same date). Quarantined lines are keyed by
SHA-256 of (source_file, raw line). Re-ingesting the same files therefore adds nothing.
Streaming also remembers its files in the checkpoint; batch mode relies on the dedupe.
"""
import hashlib
import json
import os
import time

from tssb_spark import schema as S

# Spark JSON options: strict numbers (NaN/Infinity are not JSON; schema.py agrees).
JSON_OPTIONS = {"mode": "PERMISSIVE", "allowNonNumericNumbers": "false"}
# Input files: *.jsonl anywhere under the input directory. Producers write to another name
# (e.g. .jsonl.part) and rename when the file is closed: file sources need atomic files.
FILE_GLOB = "*.jsonl"
DEFAULT_MAX_FILES_PER_TRIGGER = 1000
MODES = ("stream", "batch")


def _q(name):
    return "`%s`" % name


def _java_regex(pattern):
    # Schema patterns are ^...$; "$" would also match before a trailing newline, "\z" not.
    return "^(?:" + pattern[1:-1] + ")\\z"


def _quoted_value(field):
    # The raw line holds `"field": "` when the field's JSON value is a string. String fields
    # can not hold quotes (every one has a pattern), so this only matches the key.
    return '"%s"\\s*:\\s*"' % field


def _lit(s):
    """A Spark SQL string literal."""
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _in(expr, values):
    return "%s IN (%s)" % (expr, ", ".join(_lit(x) if isinstance(x, str) else repr(x)
                                           for x in values))


def validation_sql(catalog):
    """Build the SQL expression of a line's violations.

    Args:
      catalog: schema.Catalog.
    Returns:
      (pre, first, every): SQL texts over columns value, blank, _m (string map), _t (typed
      struct), _k ("<v>:<event>"): `pre` the line-level violation (or NULL), `first` the
      first violation (NULL when valid; uses _pre), `every` the array of all violations
      (uses _pre and _reason). Built once as text (a few JVM calls) rather than from
      thousands of Column objects.
    """
    def key_set(table, f):
        return ["%d:%s" % (ver, e) for ver in catalog.versions for e in catalog.events[ver]
                if f in table[(ver, e)]]

    checks = []
    for f in catalog.field_order:
        spec = catalog.fields[f]
        t = "_t.%s" % _q(f)
        present = "_m[%s] IS NOT NULL" % _lit(f)
        if spec["type"] == "string":
            bad_type = "NOT value RLIKE %s" % _lit(_quoted_value(f))
        elif spec["type"] == "double":
            # Spark reads the strings "NaN"/"Infinity" into doubles; JSON numbers only here.
            bad_type = "%s IS NULL OR value RLIKE %s" % (t, _lit(_quoted_value(f)))
        else:
            bad_type = "%s IS NULL" % t
        if f in catalog.envelope:
            head = "CASE WHEN NOT %s THEN %s" % (present, _lit("missing_field:" + f))
        else:
            allowed = key_set(catalog.allowed, f)
            required = key_set(catalog.required, f)
            miss = ("CASE WHEN %s THEN %s END" % (_in("_k", required), _lit("missing_field:" + f))
                    if required else "NULL")
            head = "CASE WHEN NOT %s THEN NULL WHEN NOT %s THEN %s" % (
                _in("_k", allowed), present, miss)
        parts = [head, "WHEN %s THEN %s" % (bad_type, _lit("type:" + f))]
        for kind, arg in catalog.field_checks(f):
            if kind == "enum":
                bad = "NOT " + _in(t, arg)
            elif kind == "pattern":
                bad = "NOT %s RLIKE %s" % (t, _lit(_java_regex(arg)))
            else:
                lo, hi = arg
                bad = " OR ".join(x for x in (
                    None if lo is None else "%s < %r" % (t, lo),
                    None if hi is None else "%s > %r" % (t, hi)) if x)
            parts.append("WHEN %s THEN %s" % (bad, _lit(kind + ":" + f)))
        checks.append(" ".join(parts) + " END")

    allowed_keys = "map(%s)" % ", ".join(
        "%s, array(%s)" % (_lit("%d:%s" % (ver, e)),
                           ", ".join(_lit(k) for k in catalog.envelope + catalog.allowed[(ver, e)]))
        for ver in catalog.versions for e in catalog.events[ver])
    unknown_keys = "array_except(map_keys(_m), %s[_k])" % allowed_keys
    unknown_all = "transform(array_sort(%s), k -> concat('unknown_field:', k))" % unknown_keys
    unknown_first = "concat('unknown_field:', array_min(%s))" % unknown_keys
    pre = " ".join([
        "CASE WHEN _m IS NULL OR NOT value RLIKE %s OR value RLIKE %s THEN 'unparsable'" % (
            _lit("\\}\\s*$"), _lit("\\}\\s*\\{")),
        "WHEN _m['v'] IS NULL THEN 'missing_field:v'",
        "WHEN _t.v IS NULL THEN 'type:v'",
        "WHEN NOT %s THEN 'unknown_version'" % _in("_t.v", catalog.versions),
        "WHEN _m['event'] IS NULL THEN 'missing_field:event'",
        "WHEN NOT value RLIKE %s THEN 'type:event'" % _lit(_quoted_value("event")),
        "WHEN NOT %s THEN 'unknown_event' END" % _in(
            "_k", ["%d:%s" % (ver, e) for ver in catalog.versions for e in catalog.events[ver]])])
    # The first violation uses only short-circuit, code-generated expressions (coalesce of
    # CASEs); the full list needs higher-order functions (interpreted), so it is built
    # only for the few bad lines.
    first = ("CASE WHEN blank THEN NULL WHEN _pre IS NOT NULL THEN _pre ELSE coalesce(%s, %s) END"
             % (", ".join(checks), unknown_first))
    every = ("CASE WHEN _reason IS NULL THEN CAST(array() AS ARRAY<STRING>) "
             "WHEN _pre IS NOT NULL THEN array(_pre) "
             "ELSE concat(filter(array(%s), x -> x IS NOT NULL), %s) END"
             % (", ".join(checks), unknown_all))
    return pre, first, every


def classify(df, catalog):
    """Parse and validate raw lines.

    Args:
      df: DataFrame with columns `value` (the raw line) and `source_file`.
      catalog: schema.Catalog.
    Returns:
      DataFrame with `value`, `source_file`, `blank` (bool), `_reason` (first violation,
      NULL when valid or blank), `_reasons` (all violations, empty when valid) and one
      typed column per schema column (catalog.columns).
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    value = F.col("value")
    m = F.from_json(value, T.MapType(T.StringType(), T.StringType()), JSON_OPTIONS)
    t = F.from_json(value, S.spark_struct(catalog), JSON_OPTIONS)
    df = df.select("value", "source_file", value.rlike("^\\s*$").alias("blank"),
                   m.alias("_m"), t.alias("_t"))
    df = df.withColumn("_k", F.concat_ws(":", F.col("_t.v").cast("string"), F.col("_t.event")))
    pre, first, every = validation_sql(catalog)
    df = df.selectExpr("*", "%s AS _pre" % pre)
    df = df.selectExpr("*", "%s AS _reason" % first)
    cols = ["_t.%s AS %s" % (_q(c), _q(c)) for c in catalog.columns]
    return df.selectExpr("value", "source_file", "blank", "_reason",
                         "%s AS _reasons" % every, *cols)


def read_batch(spark, input_dir):
    """Returns: DataFrame(value, source_file) of every *.jsonl line under input_dir."""
    from pyspark.sql import functions as F
    return (spark.read.format("text").option("recursiveFileLookup", "true")
            .option("pathGlobFilter", FILE_GLOB).load(input_dir)
            .select("value", F.col("_metadata.file_path").alias("source_file")))


def read_stream(spark, input_dir, max_files_per_trigger):
    """Returns: streaming DataFrame(value, source_file) over the *.jsonl files of input_dir."""
    from pyspark.sql import functions as F
    return (spark.readStream.format("text").option("recursiveFileLookup", "true")
            .option("pathGlobFilter", FILE_GLOB)
            .option("maxFilesPerTrigger", str(max_files_per_trigger)).load(input_dir)
            .select("value", F.col("_metadata.file_path").alias("source_file")))


def _exists(spark, path):
    # Hadoop FS check so the lake may live on HDFS/S3 as well as on local disk.
    jvm = spark._jvm
    p = jvm.org.apache.hadoop.fs.Path(path)
    return p.getFileSystem(spark._jsc.hadoopConfiguration()).exists(p)


def new_stats():
    """Returns: an empty counts dict of an ingest run."""
    return {"lines": 0, "blank": 0, "valid": 0, "accepted": 0, "duplicates": 0,
            "quarantined": 0, "quarantined_new": 0, "reasons": {}, "batches": 0}


def process(spark, lines, lake, catalog, stats):
    """Validate one batch of lines and append it to the lake.

    Args:
      spark: SparkSession.
      lines: DataFrame(value, source_file).
      lake: lake directory.
      catalog: schema.Catalog.
      stats: counts dict (new_stats()), updated in place.
    """
    from pyspark import StorageLevel
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.session.timeZone", "UTC")
    events_dir = os.path.join(lake, "events")
    quarantine_dir = os.path.join(lake, "quarantine")
    c = classify(lines, catalog).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        date = F.date_format(F.timestamp_millis("ts"), "yyyy-MM-dd")
        # One pass for all counts and the dates the batch touches.
        summary = (c.groupBy(F.col("blank"), F.col("_reason").alias("reason"),
                             F.when(F.col("_reason").isNull(), date).alias("date"))
                   .count().collect())
        dates = set()
        n = {"lines": 0, "blank": 0, "valid": 0, "quarantined": 0}
        for r in summary:
            n["lines"] += r["count"]
            if r["blank"]:
                n["blank"] += r["count"]
            elif r["reason"] is None:
                n["valid"] += r["count"]
                dates.add(r["date"])
            else:
                n["quarantined"] += r["count"]
                stats["reasons"][r["reason"]] = stats["reasons"].get(r["reason"], 0) + r["count"]
        for k in n:
            stats[k] += n[k]
        stats["batches"] += 1

        if n["valid"]:
            good = (c.where(~F.col("blank") & F.col("_reason").isNull())
                    .select(*catalog.columns, "source_file")
                    .withColumn("date", date)
                    .dropDuplicates(["id"]))
            if _exists(spark, events_dir):
                old = (spark.read.option("mergeSchema", "true").parquet(events_dir)
                       .where(F.col("date").isin(sorted(dates))).select("id"))
                good = good.join(old, "id", "left_anti")
            obs = Observation("accepted")
            good = good.observe(obs, F.count(F.lit(1)).alias("rows"))
            (good.write.mode("append").partitionBy("date", "node").parquet(events_dir))
            accepted = obs.get["rows"]
            stats["accepted"] += accepted
            stats["duplicates"] += n["valid"] - accepted

        if n["quarantined"]:
            bad = (c.where(F.col("_reason").isNotNull())
                   .select(F.col("value").alias("raw"), "source_file",
                           F.col("_reason").alias("reason"),
                           F.col("_reasons").alias("reasons"),
                           F.sha2(F.concat_ws("\n", "source_file", "value"), 256).alias("key"),
                           F.current_timestamp().alias("ingested_at"))
                   .dropDuplicates(["key"]))
            if _exists(spark, quarantine_dir):
                old = spark.read.parquet(quarantine_dir).select("key")
                bad = bad.join(old, "key", "left_anti")
            obs = Observation("quarantined")
            bad = bad.observe(obs, F.count(F.lit(1)).alias("rows"))
            bad.write.mode("append").parquet(quarantine_dir)
            stats["quarantined_new"] += obs.get["rows"]
    finally:
        c.unpersist()


def checkpoint_dir(lake, input_dir):
    """Returns: the streaming checkpoint of this (lake, input) pair."""
    key = hashlib.sha1(os.path.abspath(input_dir).encode()).hexdigest()[:16]
    return os.path.join(lake, "_checkpoints", key)


def ingest(spark, input_dir, lake, mode="stream", max_version=None,
           max_files_per_trigger=DEFAULT_MAX_FILES_PER_TRIGGER, progress=None):
    """Ingest every *.jsonl file under input_dir into the lake.

    Args:
      spark: SparkSession.
      input_dir: directory of JSONL logs (searched recursively).
      lake: output directory (see module docstring).
      mode: "stream" (Structured Streaming, trigger availableNow, checkpointed) or "batch".
      max_version: newest schema version to accept (default: the newest known); lines of
        a newer version are quarantined as unknown_version.
      max_files_per_trigger: files per micro-batch in stream mode.
      progress: optional callable(str) for progress messages.
    Returns:
      The counts dict (see new_stats), also appended to LAKE/_ingest_runs.jsonl.
    Raises:
      ValueError: unknown mode or missing input directory.
    """
    if mode not in MODES:
        raise ValueError("mode must be one of %s" % (MODES,))
    if not os.path.isdir(input_dir):
        raise ValueError("input directory %s does not exist" % input_dir)
    catalog = S.Catalog(max_version)
    stats = new_stats()
    say = progress or (lambda s: None)
    t0 = time.time()
    if mode == "batch":
        say("ingest (batch): reading %s" % input_dir)
        process(spark, read_batch(spark, input_dir), lake, catalog, stats)
    else:
        def each(batch, batch_id):
            process(spark, batch, lake, catalog, stats)
            say("ingest (stream): batch %d: %d lines so far" % (batch_id, stats["lines"]))

        q = (read_stream(spark, input_dir, max_files_per_trigger).writeStream
             .trigger(availableNow=True)
             .option("checkpointLocation", checkpoint_dir(lake, input_dir))
             .foreachBatch(each).start())
        q.awaitTermination()
        if q.exception() is not None:  # pragma: no cover - awaitTermination raises first
            raise q.exception()
    stats["mode"] = mode
    stats["schema_version"] = catalog.max_version
    stats["seconds"] = round(time.time() - t0, 3)
    if "://" not in lake:  # the run log is a local convenience; HDFS/S3 lakes skip it
        os.makedirs(lake, exist_ok=True)
        with open(os.path.join(lake, "_ingest_runs.jsonl"), "a", encoding="utf-8") as f:
            f.write(json.dumps(dict(stats, input=input_dir), sort_keys=True) + "\n")
    return stats


def read_events(spark, lake):
    """Returns: the lake's events table (all schema versions merged; missing fields null)."""
    return spark.read.option("mergeSchema", "true").parquet(os.path.join(lake, "events"))


def read_quarantine(spark, lake):
    """Returns: the lake's quarantine table, or None when nothing was ever quarantined."""
    path = os.path.join(lake, "quarantine")
    if not _exists(spark, path):
        return None
    return spark.read.parquet(path)
