"""Ingest JSONL event logs into a Parquet lake, with quarantine and dedupe.

Lake layout (LAKE is the --output directory):
  LAKE/events/date=YYYY-MM-DD/node=NAME/*.parquet   valid events, one row per event id
  LAKE/quarantine/*.parquet                          bad lines: raw, source_file, reason(s)
  LAKE/_checkpoints/<input hash>/                    Structured Streaming checkpoint
  LAKE/_tail/                                        offsets of live files (tail.py)
  LAKE/_ingest_runs.jsonl                            one line of counts per ingest run

One parse per line. Lines are read as text (the raw line and its file stay at hand for the
quarantine) and parsed once with `from_json` and the explicit typed schema. A line is
accepted on this parse alone when column expressions show it is exactly a valid record
(`fast_check_sql`): one regex over the raw text (`line_regex`: a flat object of schema
keys, each value of its field's type as written and matching its pattern, so the typed
parse dropped and coerced nothing) and the event and range rules on the typed values.
Only lines that fail go through the exact classifier (`classify`: a second parse as a
string map, every rule as SQL), which gives the quarantine reasons; the tests check both
agree.

One job per batch writes every line to a staging table partitioned like the lake, the
lines that need the exact check (blank ones too) in a partition of their own (date and
node null, the raw line in `id`); Spark cannot write two tables in one job, and this
keeps the common case to one pass over the input. Then: the staged ids are checked
against each other and against the lake's ids for the same dates (64-bit hashes, a small
shuffle); without duplicates the staged partitions are renamed into LAKE/events (the
normal case), otherwise the staged rows are deduplicated and appended. The exact check
then runs on the staged bad partition only, in one job writing its result to a small
table inside the staging directory; counts and the quarantine read that. Validation uses
only Spark SQL expressions (no Python UDF), so a cluster's executors need no project code.

Idempotence: valid rows are deduplicated on "id" within the batch and against the ids
already stored for the same dates (ids carry the node name and ts is part of the event, so
a repeated id lands on the same date). Quarantined lines are keyed by SHA-256 of
(source_file, raw line). Re-ingesting the same files therefore adds nothing. Streaming
also remembers its files in the checkpoint; batch mode relies on the dedupe.
"""
import contextlib
import hashlib
import json
import os
import re
import time
import uuid

from tssb_spark import schema as S
from tssb_spark import tail as TAIL

# Spark JSON options: strict numbers (NaN/Infinity are not JSON; schema.py agrees).
JSON_OPTIONS = {"mode": "PERMISSIVE", "allowNonNumericNumbers": "false",
                "allowSingleQuotes": "false"}
# Input files: *.jsonl anywhere under the input directory. Producers write to another name
# (e.g. .jsonl.part) and rename when the file is closed: file sources need atomic files.
FILE_GLOB = "*.jsonl"
DEFAULT_MAX_FILES_PER_TRIGGER = 1000
MODES = ("stream", "batch")
# Staging table under the lake, one directory per batch (removed when the batch is done).
STAGING = "_staging"
# Hive's name of a null partition value: the staged lines that need the exact check.
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
# Inside a batch's staging directory: the exact classifier's result for the lines the fast
# check did not prove valid ("_": Spark's file listing skips it when reading the staging).
CLASSIFIED = "_classified"
MS_PER_DAY = 86400000
# A blank line: JSON whitespace only (schema.JSON_WS), skipped and counted.
BLANK = "^[ \\t\\r\\n]*\\z"
# Parquet dictionaries pay only for columns with few distinct values; on the others (ids,
# timestamps, hashes, measurements) parquet-mr builds a dictionary per page and then falls
# back to plain encoding, which made it the largest cost of the write.
DICTIONARY_COLUMNS = ("v", "event", "node", "kind", "length", "src", "freq_khz", "proto",
                      "mode", "reason", "feed", "peer", "own", "ok", "source_file")
# Input splits: at least this many tasks per core (spark.sql.files.minPartitionNum; Spark
# still caps a split at spark.sql.files.maxPartitionBytes). Spark's default of one split
# per core packs a 150 MB input into 3 tasks on 2 cores, and the third then runs alone.
TASKS_PER_CORE = 4
PARQUET_OPTIONS = dict([("parquet.enable.dictionary", "false")] + [
    ("parquet.enable.dictionary#" + c, "true") for c in DICTIONARY_COLUMNS])


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
      (pre, every): SQL texts over columns value, blank, _m (string map), _t (typed
      struct), _k ("<v>:<event>"): `pre` the line-level violation (or NULL), `every` the
      array of all violations in rule order (uses _pre; empty when valid or blank). Built
      once as text (a few JVM calls) rather than from thousands of Column objects.
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
    pre = " ".join([
        # The JSON parser ignores text after the object; wrapped in [ ] it must be the
        # array's only element, so any trailing text fails the parse.
        "CASE WHEN _m IS NULL OR NOT value RLIKE %s OR value RLIKE %s OR coalesce(size("
        "from_json(concat('[', value, ']'), 'array<string>', map('allowSingleQuotes', "
        "'false'))), 0) != 1 THEN 'unparsable'" % (_lit("\\}\\s*$"), _lit("\\}\\s*\\{")),
        "WHEN _m['v'] IS NULL THEN 'missing_field:v'",
        "WHEN _t.v IS NULL THEN 'type:v'",
        "WHEN NOT %s THEN 'unknown_version'" % _in("_t.v", catalog.versions),
        "WHEN _m['event'] IS NULL THEN 'missing_field:event'",
        "WHEN NOT value RLIKE %s THEN 'type:event'" % _lit(_quoted_value("event")),
        "WHEN NOT %s THEN 'unknown_event' END" % _in(
            "_k", ["%d:%s" % (ver, e) for ver in catalog.versions for e in catalog.events[ver]])])
    # One list of all violations, the first of which is the line's reason: the rules
    # appear once in the plan (planning them costs more than running them on the few
    # lines that get here). Higher-order functions are interpreted, which is fine there.
    every = ("CASE WHEN blank THEN CAST(array() AS ARRAY<STRING>) "
             "WHEN _pre IS NOT NULL THEN array(_pre) "
             "ELSE concat(filter(array(%s), x -> x IS NOT NULL), %s) END"
             % (", ".join(checks), unknown_all))
    return pre, every



# What a value of each non-string type may look like in a line the fast check accepts. The
# JSON syntax itself is Jackson's to check (a syntax error nulls the whole typed row, so the
# line fails the check); these only make sure the typed parse keeps the value: integers are
# bounded in digits so they can not overflow (9 digits < 2^31, 18 digits < 2^63; a longer
# value, valid or not, takes the exact check), and no number is accepted for a bool or text.
_NUMBER = {"int": "-?[0-9]{1,9}+", "long": "-?[0-9]{1,18}+", "double": "-?[0-9][0-9.eE+-]*+",
           "bool": "(?:true|false)"}
# A pattern the line regex can embed: one character class (no quote, no backslash) repeated.
_SIMPLE_PATTERN = re.compile(r"\^(\[[^\]\"\\]+\]\{\d+(?:,\d+)?\})\$")
# A string that JSON writes without escapes (no quote, no backslash, no control character).
_PLAIN_TEXT = re.compile(r"[ !#-\[\]-~]+")
# Blanks the fast check allows around JSON tokens (what json.dumps and compact writers emit).
_WS = "[ \\t]*+"


def _value_regex(catalog, f):
    """The regex of field f's JSON value in a line the fast check accepts, or None when the
    field's valid values can not all be written that way (then lines with f take the exact
    check). A string value must be a literal that is valid as written (no escapes), so the
    typed parse holds exactly the text the regex checked."""
    spec = catalog.fields[f]
    if spec["type"] != "string":
        return _NUMBER.get(spec["type"])
    if "pattern" in spec:
        m = _SIMPLE_PATTERN.fullmatch(spec["pattern"])
        return '"%s+"' % m.group(1) if m else None
    names = spec.get("enum") or (
        sorted({e for v in catalog.versions for e in catalog.events[v]}) if f == "event" else None)
    if names and all(_PLAIN_TEXT.fullmatch(x) for x in names):
        return '"(?:%s)"' % "|".join(re.escape(x) for x in names)
    return None


def line_regex(catalog):
    """The Java regex a line must match to be accepted on its typed parse alone.

    One flat JSON object: every key a schema field, written once or more (JSON's last value
    wins, for Spark's parser and Python's alike), every value of its field's type and
    converted by the typed parse without loss (so that parse drops no key: no unknown key,
    no null, no string read from a number, no number too large for its type), string
    values matching their field's pattern as written, nothing before or after the object
    but blanks. At most as many pairs as the largest event has fields (the bound also keeps
    Java's recursive matcher shallow on a hostile line). Keys are tried envelope first,
    then by how many events use them (the alternation is the matcher's main cost), and
    never backtracked into (keys end with a quote, values with a delimiter).
    """
    uses = {}
    for fields in catalog.allowed.values():
        for f in fields:
            uses[f] = uses.get(f, 0) + 1
    order = catalog.envelope + tuple(sorted(uses, key=lambda f: (-uses[f], f)))
    pairs = []
    for f in order:
        r = _value_regex(catalog, f)
        if r is not None:
            pairs.append("%s\"%s:%s%s" % (re.escape(f), _WS, _WS, r))
    pair = '"(?>%s)' % "|".join(pairs)
    most = len(catalog.envelope) + max(len(a) for a in catalog.allowed.values())
    return "^%s\\{%s%s(?:%s,%s%s){0,%d}%s\\}%s\\z" % (
        _WS, _WS, pair, _WS, _WS, pair, most - 1, _WS, _WS)


def fast_key_sql(catalog):
    """SQL: an int key of a parsed line's (version, event), NULL unless the version knows
    the event (no arithmetic on v: Spark's ANSI mode would fail the job on an overflow)."""
    return "CASE _t.v %s END" % " ".join(
        "WHEN %d THEN CASE _t.event %s END" % (v, " ".join(
            "WHEN %s THEN %d" % (_lit(e), key) for e, key in _event_keys(catalog, v)))
        for v in catalog.versions)


def _event_keys(catalog, v):
    return [(e, v * 100 + i) for i, e in enumerate(catalog.events[v])]


def fast_check_sql(catalog):
    """Build the SQL predicate that proves a line valid from its one typed parse.

    True only for lines the exact rules accept (the converse fails for a few valid lines,
    e.g. with null-valued keys or escaped characters; they go through the exact
    classifier): the raw line matches line_regex (structure, keys, value types and
    patterns), and on the typed values the event is one of its version, its required fields
    are there, no field of another event is, and numbers are in range.

    Args:
      catalog: schema.Catalog.
    Returns:
      SQL text over columns `value` (raw line), `_t` (typed struct) and `_k` (fast_key_sql).
    """
    keys = {(v, e): k for v in catalog.versions for e, k in _event_keys(catalog, v)}

    def key_set(table, f):
        return ", ".join(str(keys[ve]) for ve in sorted(keys) if f in table[ve])

    conds = ["_k IS NOT NULL", "value RLIKE %s" % _lit(line_regex(catalog))]
    for f in catalog.field_order:
        t = "_t.%s" % _q(f)
        ok = " AND ".join(
            x for kind, arg in catalog.field_checks(f) if kind == "range"
            for x in (None if arg[0] is None else "%s >= %r" % (t, arg[0]),
                      None if arg[1] is None else "%s <= %r" % (t, arg[1])) if x) or "true"
        if f in catalog.envelope:
            conds.append("%s IS NOT NULL AND %s" % (t, ok))
            continue
        req = key_set(catalog.required, f)
        conds.append("CASE WHEN %s IS NULL THEN %s ELSE _k IN (%s) AND %s END" % (
            t, "NOT _k IN (%s)" % req if req else "true", key_set(catalog.allowed, f), ok))
    return "(" + ") AND (".join(conds) + ")"


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
    df = df.select("value", "source_file", value.rlike(BLANK).alias("blank"),
                   m.alias("_m"), t.alias("_t"))
    df = df.withColumn("_k", F.concat_ws(":", F.col("_t.v").cast("string"), F.col("_t.event")))
    pre, every = validation_sql(catalog)
    df = df.selectExpr("*", "%s AS _pre" % pre)
    df = df.selectExpr("*", "%s AS _reasons" % every)
    cols = ["_t.%s AS %s" % (_q(c), _q(c)) for c in catalog.columns]
    return df.selectExpr("value", "source_file", "blank", "get(_reasons, 0) AS _reason",
                         "_reasons", *cols)


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


def read_copies(spark, copies):
    """Returns: DataFrame(value, source_file) of tail copies, each line credited to the
    live file it was copied from (tail.collect)."""
    from pyspark.sql import functions as F
    names = []
    for dest, live in copies:
        names += [F.lit(os.path.basename(dest)), F.lit(_file_uri(live))]
    return (spark.read.format("text").load([d for d, _ in copies])
            .select("value", F.element_at(F.create_map(*names), F.regexp_extract(
                F.col("_metadata.file_path"), "[^/]+$", 0)).alias("source_file")))


def _file_uri(path):
    # The form Spark gives _metadata.file_path for a local file.
    return "file://" + os.path.abspath(path)


def _local(path):
    return "://" not in path or path.startswith("file:")


def _exists(spark, path):
    # Hadoop FS check so the lake may live on HDFS/S3 as well as on local disk.
    fs, p = _fs(spark, path)
    return fs.exists(p)


def new_stats():
    """Returns: an empty counts dict of an ingest run."""
    return {"lines": 0, "blank": 0, "valid": 0, "accepted": 0, "duplicates": 0,
            "quarantined": 0, "quarantined_new": 0, "reasons": {}, "batches": 0}


def stage_rows(lines, catalog):
    """Parse lines once and shape them for the staging table.

    Args:
      lines: DataFrame(value, source_file).
      catalog: schema.Catalog.
    Returns:
      (df, cols): df has value, source_file, _t (typed struct) and _ok (proven valid);
      cols is the SQL select of a staged row: catalog.columns, source_file and date, where
      a line not proven valid (blank lines too) has date and node NULL and the raw line in
      `id`.
    """
    from pyspark.sql import functions as F

    t = F.from_json(F.col("value"), S.spark_struct(catalog), JSON_OPTIONS).alias("_t")
    # _k in a projection of its own: many checks read it, and Spark evaluates a
    # non-trivial expression used more than once in its own projection anyway.
    df = lines.select("value", "source_file", t).selectExpr("*", "%s AS _k" % fast_key_sql(catalog))
    df = df.selectExpr("value", "source_file", "_t",
                       "coalesce(%s, false) AS _ok" % fast_check_sql(catalog))
    # A line to check again keeps its raw text in `id` and goes to the partition
    # date=NULL/node=NULL (a valid line has both); its other columns are never read.
    cols = []
    for c in catalog.columns:
        if c == "id":
            cols.append("CASE WHEN _ok THEN _t.id ELSE value END AS id")
        elif c == "node":
            cols.append("CASE WHEN _ok THEN _t.node END AS node")
        else:
            cols.append("_t.%s AS %s" % (_q(c), _q(c)))
    cols.append("source_file")
    cols.append("CASE WHEN _ok THEN %s END AS date" % date_sql("_t.ts"))
    return df, cols


def date_sql(ts):
    """SQL: the UTC date of epoch milliseconds `ts` (integer arithmetic, no formatter)."""
    return "date_from_unix_date(CAST(%s DIV %d AS INT))" % (ts, MS_PER_DAY)


def _write(df, path):
    """Append df to a lake-shaped table (partitioned by date and node)."""
    w = df.write.mode("append").partitionBy("date", "node")
    for k, v in PARQUET_OPTIONS.items():
        w = w.option(k, v)
    w.parquet(path)


def _fs(spark, path):
    """(Hadoop FileSystem, Path) of a path: local, HDFS or S3 alike."""
    jvm = spark._jvm
    p = jvm.org.apache.hadoop.fs.Path(path)
    return p.getFileSystem(spark._jsc.hadoopConfiguration()), p


def _partitions(spark, staging):
    """Returns: [(date, node, hadoop Path of the directory)] of the staged valid rows."""
    fs, root = _fs(spark, staging)
    out = []
    if not fs.exists(root):
        return out
    for d in fs.listStatus(root):
        dn = d.getPath().getName()
        if not d.isDirectory() or not dn.startswith("date=") or dn == "date=" + NULL_PARTITION:
            continue
        for n in fs.listStatus(d.getPath()):
            nn = n.getPath().getName()
            if n.isDirectory() and nn.startswith("node="):
                out.append((dn[5:], nn[5:], n.getPath()))
    return out


def _move_files(spark, parts, events_dir):
    """Rename the staged partitions into the lake: a whole directory where the lake has
    none of that name yet (one rename per new date or node), else file by file."""
    fs, root = _fs(spark, events_dir)
    Path = spark._jvm.org.apache.hadoop.fs.Path

    def move(src, dst):
        if not fs.rename(src, dst):
            raise IOError("could not move %s to %s" % (src, dst))

    fs.mkdirs(root)
    for date in sorted({d for d, _, _ in parts}):
        here = [(n, src) for d, n, src in parts if d == date]
        day = Path(root, "date=" + date)
        if not fs.exists(day):
            move(here[0][1].getParent(), day)
            continue
        for node, src in here:
            dst = Path(day, "node=" + node)
            if not fs.exists(dst):
                move(src, dst)
                continue
            for f in fs.listStatus(src):
                if f.getPath().getName().endswith(".parquet"):
                    move(f.getPath(), Path(dst, f.getPath().getName()))


def _ids(spark, path):
    """The id column of a lake-shaped table (explicit schema: no inference, no merge)."""
    return spark.read.schema("id string, date string, node string").parquet(path)


def _append_events(spark, rows, events_dir, dates, catalog):
    """Deduplicate rows on id, drop ids the lake holds for `dates`, append. Returns rows added."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F
    good = rows.select(*catalog.columns, "source_file", "date").dropDuplicates(["id"])
    if _exists(spark, events_dir):
        old = _ids(spark, events_dir).where(F.col("date").isin(dates)).select("id")
        good = good.join(old, "id", "left_anti")
    obs = Observation("accepted")
    _write(good.observe(obs, F.count(F.lit(1)).alias("rows")), events_dir)
    return obs.get["rows"]


def process(spark, lines, lake, catalog, stats):
    """Validate one batch of lines and append it to the lake.

    Args:
      spark: SparkSession.
      lines: DataFrame(value, source_file).
      lake: lake directory.
      catalog: schema.Catalog.
      stats: counts dict (new_stats()), updated in place.
    """
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.session.timeZone", "UTC")
    events_dir = os.path.join(lake, "events")
    staging = os.path.join(lake, STAGING, uuid.uuid4().hex)
    df, cols = stage_rows(lines, catalog)
    tasks = TASKS_PER_CORE * spark.sparkContext.defaultParallelism
    with _session_conf(spark, {"spark.sql.files.minPartitionNum": str(tasks)}):
        _write(df.selectExpr(*cols), staging)
    stats["batches"] += 1
    try:
        parts = _partitions(spark, staging)
        dates = sorted({d for d, _, _ in parts})
        fast, repeated = _count_ids(spark, staging, events_dir, dates) if parts else (0, False)
        if repeated:
            rows = (spark.read.schema(_staging_schema(catalog)).parquet(staging)
                    .where(F.col("date").isNotNull()))
            added = _append_events(spark, rows, events_dir, dates, catalog)
        elif parts:
            _move_files(spark, parts, events_dir)
            added = fast
        else:
            added = 0
        lines_, blank, valid, accepted = _exact(spark, staging, lake, catalog, stats)
        stats["lines"] += fast + lines_
        stats["blank"] += blank
        stats["valid"] += fast + valid
        stats["accepted"] += added + accepted
        stats["duplicates"] += fast + valid - added - accepted
    finally:
        fs, root = _fs(spark, staging)
        fs.delete(root, True)


@contextlib.contextmanager
def _session_conf(spark, conf):
    """Set SQL settings for one job and restore the session's own afterwards (the caller's
    session is not ours to change)."""
    old = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def _count_ids(spark, staging, events_dir, dates):
    """One job over the ids: the staged valid rows, and whether an id repeats among them
    or is already in the lake for the same dates.

    Returns:
      (rows, repeated). 64-bit hashes of the ids, not the ids, cross the shuffle; a
      collision only sends the batch down the exact dedupe.
    """
    from pyspark.sql import functions as F
    ids = (_ids(spark, staging).where(F.col("date").isNotNull())
           .select(F.xxhash64("id").alias("h"), F.lit(1).alias("new")))
    if _exists(spark, events_dir):
        ids = ids.unionAll(_ids(spark, events_dir).where(F.col("date").isin(dates))
                           .select(F.xxhash64("id").alias("h"), F.lit(0).alias("new")))
    r = (ids.groupBy("h").agg(F.count(F.lit(1)).alias("n"), F.sum("new").alias("new"))
         .agg(F.sum("new").alias("rows"), F.max("n").alias("most")).first())
    return r["rows"] or 0, (r["most"] or 0) > 1


def _staging_schema(catalog):
    from pyspark.sql import types as T
    st = S.spark_struct(catalog)
    return T.StructType(list(st.fields) + [T.StructField("source_file", T.StringType()),
                                           T.StructField("date", T.StringType())])


def _exact(spark, staging, lake, catalog, stats):
    """Run the exact classifier on the staged lines the fast check did not prove valid:
    blank lines are counted, valid ones join the events, the rest go to the quarantine.

    Returns:
      (lines, blank, valid, accepted): the lines looked at, how many were blank and valid,
      and how many of the valid ones were new to the lake.
    """
    from pyspark.sql import Observation
    from pyspark.sql import functions as F
    fs, root = _fs(spark, staging)
    if not fs.exists(spark._jvm.org.apache.hadoop.fs.Path(root, "date=" + NULL_PARTITION)):
        return 0, 0, 0, 0
    events_dir = os.path.join(lake, "events")
    quarantine_dir = os.path.join(lake, "quarantine")
    classified = os.path.join(staging, CLASSIFIED)
    raw = (spark.read.schema(_staging_schema(catalog)).parquet(staging)
           .where(F.col("date").isNull()).select(F.col("id").alias("value"), "source_file"))
    # The classifier's expressions are large and planning them costs more than running
    # them on a few lines: one job classifies and writes the result, the queries below
    # read that small table.
    (classify(raw, catalog)
     .withColumn("date", F.when(F.col("_reason").isNull() & ~F.col("blank"),
                                F.expr(date_sql("ts"))))
     .write.parquet(classified))
    c = spark.read.parquet(classified)
    summary = c.groupBy("blank", F.col("_reason").alias("reason"), "date").count().collect()
    lines = blank = valid = bad = 0
    dates = set()
    for r in summary:
        lines += r["count"]
        if r["blank"]:
            blank += r["count"]
        elif r["reason"] is None:
            valid += r["count"]
            dates.add(str(r["date"]))
        else:
            bad += r["count"]
            stats["reasons"][r["reason"]] = stats["reasons"].get(r["reason"], 0) + r["count"]
    stats["quarantined"] += bad
    added = 0
    if valid:
        good = c.where(F.col("date").isNotNull())
        added = _append_events(spark, good, events_dir, sorted(dates), catalog)
    if bad:
        rows = (c.where(F.col("_reason").isNotNull())
                .select(F.col("value").alias("raw"), "source_file",
                        F.col("_reason").alias("reason"),
                        F.col("_reasons").alias("reasons"),
                        F.sha2(F.concat_ws("\n", "source_file", "value"), 256).alias("key"),
                        F.current_timestamp().alias("ingested_at"))
                .dropDuplicates(["key"]))
        if _exists(spark, quarantine_dir):
            old = spark.read.parquet(quarantine_dir).select("key")
            rows = rows.join(old, "key", "left_anti")
        obs = Observation("quarantined")
        rows = rows.observe(obs, F.count(F.lit(1)).alias("rows"))
        rows.write.mode("append").parquet(quarantine_dir)
        stats["quarantined_new"] += obs.get["rows"]
    return lines, blank, valid, added


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
      The counts dict (see new_stats), also appended to LAKE/_ingest_runs.jsonl. Lines
      appended to live files (*.jsonl.live, local input) since the last run are included
      (tail.py).
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
    if _local(input_dir) and _local(lake):
        copies, state = TAIL.collect(input_dir, lake)
        if copies:
            say("ingest (live files): %d with new lines" % len(copies))
            process(spark, read_copies(spark, copies), lake, catalog, stats)
        TAIL.commit(lake, state, copies)
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
