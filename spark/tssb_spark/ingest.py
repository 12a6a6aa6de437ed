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
(`fast_check_sql`): the raw line ends with its only "}" and holds one comma fewer than
the typed row has non-null columns (so every key is a schema key, present once, with a
non-null value of its column's type), the string values came from JSON strings and match
their patterns, and the event and range rules hold on the typed values (on a lake on local
disk the driver checks the patterns of DEFERRED_FIELDS after the job instead). The few
lines that fail are classified exactly, in the driver (`schema.verdict`, the Spark
classifier's reasons) when there are at most DRIVER_LINES of them, else by Spark
(`classify`: a second parse as a string map, every rule as SQL); the tests check that the
three agree. On a lake on local disk the driver's
small steps read and write Parquet with PyArrow, without a Spark job: the lines to check
again, the ids of the repeat check, the quarantine's keys and its new rows.

One job per batch writes every line to a staging table partitioned like the lake, the
lines that need the exact check (blank ones too) in a partition of their own (date and
node null, the raw line in `id`); Spark cannot write two tables in one job, and this
keeps the common case to one pass over the input. Then: the staged ids are checked
against each other and against the lake's ids for the dates the lake has (64-bit hashes,
a small shuffle); without duplicates the staged partitions are renamed into LAKE/events
(the normal case), otherwise the staged rows are deduplicated and appended. The exact
check then reads the staged bad partition only. Validation in Spark uses only SQL
expressions (no Python UDF), so a cluster's executors need no project code.

Idempotence: valid rows are deduplicated on "id" within the batch and against the ids
already stored for the same dates (ids carry the node name and ts is part of the event, so
a repeated id lands on the same date). Quarantined lines are keyed by SHA-256 of
(source_file, raw line). Re-ingesting the same files therefore adds nothing. Streaming
also remembers its files in the checkpoint; batch mode relies on the dedupe.
"""
import contextlib
import datetime
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
# Lines the fast check did not prove valid, up to this many in a batch, are classified in
# the driver (schema.verdict: the Spark classifier's reasons, without planning its large
# expressions); more take the Spark classifier.
DRIVER_LINES = 20000
# ... and only lines of at most this many bytes (an event line takes 100-300): the driver
# holds at most DRIVER_LINES of them. Longer ones take the Spark classifier.
DRIVER_LINE_BYTES = 4096
# The repeat check of a batch's ids (_count_ids) runs in the driver when the lake is on
# local disk and the Parquet files it reads (the staged valid rows and the lake's for the
# same dates) hold at most this many bytes: PyArrow reads the ids, numpy hashes them to 64
# bits and sorts them (8 bytes an id, a few more while hashing; an event row takes 30-40
# bytes of Parquet), a fraction of a shuffle-and-aggregate job's cost. Larger checks, and
# lakes on HDFS or S3, stay in Spark.
DRIVER_ID_BYTES = 64 << 20
# Fields whose pattern the driver checks after the staging job of a batch on a local lake
# (_deferred_hold), in place of a regex per line in the job: their values are at hand
# there, the ids as read for the repeat check and the nodes as partition names. Should
# one fail, the batch is staged again with the whole fast check, which sends its line to
# the exact check.
DEFERRED_FIELDS = ("id", "node")
PARQUET_OPTIONS = dict([("parquet.enable.dictionary", "false")] + [
    ("parquet.enable.dictionary#" + c, "true") for c in DICTIONARY_COLUMNS])


def _q(name):
    return "`%s`" % name


def _java_regex(pattern):
    # Schema patterns are ^...$; "$" would also match before a trailing newline, "\z" not.
    return "^(?:" + pattern[1:-1] + ")\\z"


def _not_string(field):
    """SQL: the field's JSON value is not a string (from _v, the map of variants: the
    typed parse and the string map turn numbers and bools into text). Were _v missing (a
    value over the variant size limit), the raw line holding `"field": "` decides."""
    return "NOT coalesce(schema_of_variant(_v[%s]) = 'STRING', value RLIKE %s)" % (
        _lit(field), _lit('"%s"\\s*:\\s*"' % field))


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
      (pre, every): SQL texts over columns value, blank, _m (string map), _v (map of
      variants), _t (typed struct), _k ("<v>:<event>"): `pre` the line-level violation (or NULL), `every` the
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
            bad_type = _not_string(f)
        else:
            # Strings do not convert to numbers or bools (no NaN/Infinity: JSON_OPTIONS).
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
        "WHEN %s THEN 'type:event'" % _not_string("event"),
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



# The fast check (fast_check_sql). The typed parse (PERMISSIVE, no corrupt-record column:
# Spark then copies every row field by field, a name lookup and a boxed value each) gives
# NULL in every column for a line that does not parse (Spark keeps no partial result of a
# syntax error) and NULL in a column whose type refuses the value (a string or a float
# for an int, a string for a double or bool, an integer out of range): either way a key
# of the line has no non-null column, which the comma count sees. What the parse forgives
# without a word is what the check looks at in the raw text: keys it drops (unknown, null-valued,
# written twice: the commas count them), a number or bool read into a string column as
# text (STRINGIFIED), and text after the object (the one "}" must be the last character).
# What a number, true or false becomes when the parse reads it into a string column: text
# in this language (a number's own text or Java's, both of this form; true, false; a
# float too large for a double becomes "Infinity", in quotes, which no pattern admits).
# A string value outside it came from a JSON string. One inside it ("12", hex digits
# without a letter) is proved a string by the raw line holding the key and the quoted
# value together. Pinned by the tests (every kind of token in every string field).
STRINGIFIED = ("-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
               "|true|false|-?Infinity|NaN")
# The characters a STRINGIFIED text can start with (the driver searches only the values
# that start with one; tests/spark/test_ingest.py checks this against STRINGIFIED).
STRINGIFIED_FIRST = "-0123456789tfIN"
# One bit per column in a long: the columns present in a line (fast_columns_sql).
MAX_MASK_COLUMNS = 62


# A pattern of lower-case hex digits: checked with native functions (a regex per value
# costs several times more).
_HEX_PATTERN = re.compile(r"\^\[0-9a-f\]\{(\d+)\}\$")


def _string_check(f, pattern=None):
    """SQL: field f's string value matches its pattern (if any) and came from a JSON string
    (STRINGIFIED above; the raw text is searched only for values inside that language)."""
    t = "_t.%s" % _q(f)
    body = pattern[1:-1] if pattern else ".*"
    quoted = " OR ".join("contains(value, concat(%s, %s, '\"'))" % (_lit('"%s":%s"' % (f, ws)), t)
                         for ws in ("", " "))
    proved = _proved_sql(t, body)
    hexed = _HEX_PATTERN.fullmatch(pattern or "")
    if hexed:
        # A hex digit other than e is in no number's text.
        letter = " OR ".join("contains(%s, '%s')" % (t, c) for c in "abcdf")
        return ("(octet_length(%s) = %s AND unhex(%s) IS NOT NULL AND %s = lower(%s) AND "
                "(%s OR %s OR (%s)))" % (t, hexed.group(1), t, t, t, letter, proved, quoted))
    return "(%s OR (%s RLIKE %s AND (%s)))" % (proved, t, _lit("^(?:%s)\\z" % body), quoted)


def _proved_sql(t, body):
    """SQL: string value t matches pattern body (no anchors) and is not STRINGIFIED."""
    return "%s RLIKE %s" % (t, _lit("^(?!(?:%s)\\z)(?:%s)\\z" % (STRINGIFIED, body)))


def _stringifiable(value):
    """Whether a number or bool read into a string column could give this text."""
    return re.fullmatch(STRINGIFIED, value) is not None


def _masks(catalog):
    """Returns: ({column: bit}, {(version, event): (allowed mask, required mask)})."""
    cols = list(catalog.columns)
    if len(cols) > MAX_MASK_COLUMNS:
        raise S.SchemaError("the fast check handles at most %d columns" % MAX_MASK_COLUMNS)
    bit = {c: 1 << i for i, c in enumerate(cols)}
    env = sum(bit[f] for f in catalog.envelope)
    return bit, {ve: (env | sum(bit[f] for f in catalog.allowed[ve]),
                      env | sum(bit[f] for f in catalog.required[ve])) for ve in catalog.allowed}


def fast_columns_sql(catalog):
    """SQL of the columns the fast check reads, over `_t` (the typed struct), in two
    projections (the second reads _k).

    Returns:
      [[_k: 1 + the index of (version, event) in the catalog's list of them, NULL unless
      the version knows the event; _p: the non-null columns, one bit each],
      [_a / _r: the columns the event allows / requires]]
    """
    bit, masks = _masks(catalog)
    keys, by_version = [], []
    for v in catalog.versions:
        if catalog.events[v]:
            # One array lookup per line in place of a branch per event and mask: the
            # generated method shrinks by a fifth (29 KB of bytecode to 23.5 KB).
            by_version.append("WHEN %d THEN nullif(array_position(array(%s), _t.event), 0) + %d"
                              % (v, ", ".join(_lit(e) for e in catalog.events[v]), len(keys)))
            keys += [(v, e) for e in catalog.events[v]]
    # Bits joined with "|": "+" is an overflow-checked call per term under ANSI SQL.
    present = " | ".join("CASE WHEN _t.%s IS NULL THEN 0L ELSE %dL END" % (_q(c), bit[c])
                         for c in catalog.columns)

    def mask(i):
        return "element_at(array(%s), _k)" % ", ".join("%dL" % masks[ve][i] for ve in keys)
    return [["CAST(CASE _t.v %s END AS INT) AS _k" % " ".join(by_version),
             "%s AS _p" % present],
            ["%s AS _a" % mask(0), "%s AS _r" % mask(1)]]


def fast_check_sql(catalog, deferred=()):
    """Build the SQL predicate that proves a line valid from its one typed parse.

    True only for lines the exact rules accept (lines with a null value, a repeated key,
    blanks after the object or a string value that looks like a number take the exact
    check). With N the number of non-null typed columns: the raw line ends with its only
    "}" (so the object ends there) and has N - 1 commas (a non-null column comes from a
    key of its name, and an object of P keys has P - 1 separating commas: so the line has
    exactly those N keys, each once, and no comma elsewhere; a syntax error or a value
    its column's type refuses leaves a key without a non-null column); the event is one
    of its version, has its required columns and no other event's; every string value
    matches its pattern or enum in a form no number or bool becomes (_string_check),
    numbers are in range. docs/spark.md gives the argument.

    Args:
      catalog: schema.Catalog.
      deferred: fields whose pattern check is left out (_deferred: the driver checks
        their values after the job).
    Returns:
      SQL text over `value` (raw line), `_t` (typed struct) and the columns of
      fast_columns_sql.
    """
    conds = ["_k IS NOT NULL", "(_p | _a) = _a", "(_p & _r) = _r",
             "endswith(value, '}')",
             "NOT contains(substr(CAST(value AS BINARY), 1, octet_length(value) - 1), X'7D')",
             "size(split(value, ',')) = bit_count(_p)"]
    for f in catalog.field_order:
        t = "_t.%s" % _q(f)
        ok = []
        for kind, arg in catalog.field_checks(f):
            if kind == "enum":
                ok.append(_in(t, arg))
                if any(_stringifiable(x) for x in arg):
                    ok.append(_string_check(f))
            elif kind == "pattern":
                ok.append(_string_check(f, arg))
            else:
                lo, hi = arg
                ok += [x for x in (None if lo is None else "%s >= %r" % (t, lo),
                                   None if hi is None else "%s <= %r" % (t, hi)) if x]
        if catalog.fields[f]["type"] == "string" and not ok and f != "event":
            raise S.SchemaError("string field %s has no pattern or enum" % f)
        if ok and f not in deferred:
            conds.append("%s IS NULL OR (%s)" % (t, " AND ".join(ok)))
    if any(_stringifiable(e) for v in catalog.versions for e in catalog.events[v]):
        raise S.SchemaError("an event name a number or bool could be read as")
    _check_no_separators(catalog)
    return "(" + ") AND (".join(conds) + ")"


# A string pattern the fast check can reason about: one character class, repeated.
_CLASS_PATTERN = re.compile(r"\^(\[[^\]]+\])\{(\d+)(?:,(\d+))?\}\$")


def _check_no_separators(catalog):
    """The fast check counts commas and braces in the raw line: no string value it accepts
    may hold one. Raises SchemaError for a pattern, enum value or event name that could."""
    for f in catalog.field_order:
        for kind, arg in catalog.field_checks(f):
            if kind == "pattern":
                m = _CLASS_PATTERN.fullmatch(arg)
                if not m or any(re.fullmatch(m.group(1), c) for c in ",{}"):
                    raise S.SchemaError("pattern of %s: the fast check needs one character "
                                        "class without , { or }" % f)
            elif kind == "enum" and any(set(x) & set(",{}") for x in arg if isinstance(x, str)):
                raise S.SchemaError("enum of %s holds , { or }" % f)
    if any(set(e) & set(",{}") for v in catalog.versions for e in catalog.events[v]):
        raise S.SchemaError("an event name holds , { or }")


def _deferred(catalog):
    """The DEFERRED_FIELDS whose check the driver can make: {field: pattern body} of the
    string fields with one pattern, a character class repeated (_CLASS_PATTERN), that
    admits no "%" (a partition name then is the value itself: Hive writes a character it
    escapes as "%" and its code)."""
    out = {}
    for f in DEFERRED_FIELDS:
        checks = catalog.field_checks(f) if f in catalog.fields else []
        if len(checks) == 1 and checks[0][0] == "pattern":
            m = _CLASS_PATTERN.fullmatch(checks[0][1])
            if m and not re.fullmatch(m.group(1), "%"):
                out[f] = checks[0][1][1:-1]
    return out


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
    v = F.from_json(value, T.MapType(T.StringType(), T.VariantType()), JSON_OPTIONS)
    t = F.from_json(value, S.spark_struct(catalog), JSON_OPTIONS)
    df = df.select("value", "source_file", value.rlike(BLANK).alias("blank"),
                   m.alias("_m"), v.alias("_v"), t.alias("_t"))
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
            "quarantined": 0, "quarantined_new": 0, "reasons": {}, "batches": 0,
            "rechecked": 0}


def stage_rows(lines, catalog, deferred=()):
    """Parse lines once and shape them for the staging table.

    Args:
      lines: DataFrame(value, source_file).
      catalog: schema.Catalog.
      deferred: fields the fast check leaves to the driver (fast_check_sql).
    Returns:
      (df, cols): df has value, source_file, _t (typed struct) and _ok (proven valid);
      cols is the SQL select of a staged row: catalog.columns, source_file and date, where
      a line not proven valid (blank lines too) has date and node NULL and the raw line in
      `id`.
    """
    from pyspark.sql import functions as F

    t = F.from_json(F.col("value"), S.spark_struct(catalog), JSON_OPTIONS).alias("_t")
    # The check's inputs in a projection of their own: many conditions read them, and
    # Spark evaluates a non-trivial expression used more than once in its own projection
    # anyway.
    df = lines.select("value", "source_file", t)
    for projection in fast_columns_sql(catalog):
        df = df.selectExpr("*", *projection)
    df = df.selectExpr("value", "source_file", "_t",
                       "coalesce(%s, false) AS _ok" % fast_check_sql(catalog, deferred))
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


def _utc_date(ts):
    """date_sql in Python: the UTC date of epoch milliseconds `ts` (ISO text)."""
    return (datetime.date(1970, 1, 1) + datetime.timedelta(days=ts // MS_PER_DAY)).isoformat()


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
    """Returns: [(date, node, path of the directory)] of the staged valid rows (on a local
    lake listed by the OS: a listing through Hadoop costs a JVM call per entry)."""
    def valid_date(d):          # the bad lines' partition is not listed inside
        return d.startswith("date=") and d != "date=" + NULL_PARTITION
    if _local(staging):
        root = _os_path(staging)
        days = ([d for d in sorted(os.listdir(root))
                 if valid_date(d) and os.path.isdir(os.path.join(root, d))]
                if os.path.isdir(root) else [])
        return [(d[5:], n[5:], os.path.join(root, d, n)) for d in days
                for n in sorted(os.listdir(os.path.join(root, d)))
                if n.startswith("node=") and os.path.isdir(os.path.join(root, d, n))]
    fs, root = _fs(spark, staging)
    out = []
    if not fs.exists(root):
        return out
    for d in fs.listStatus(root):
        dn = d.getPath().getName()
        if d.isDirectory() and valid_date(dn):
            for n in fs.listStatus(d.getPath()):
                nn = n.getPath().getName()
                if n.isDirectory() and nn.startswith("node="):
                    out.append((dn[5:], nn[5:], n.getPath().toString()))
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
        here = [(n, Path(src)) for d, n, src in parts if d == date]
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


def _lake_dates(spark, events_dir, dates):
    """Returns: the dates among `dates` the lake has a directory for."""
    fs, root = _fs(spark, events_dir)
    Path = spark._jvm.org.apache.hadoop.fs.Path
    return [d for d in dates if fs.exists(Path(root, "date=" + d))]


def _lake_ids(spark, events_dir, dates):
    """The ids the lake holds for `dates` (only those directories are listed and read), or
    None when it has none of them."""
    return _ids_at(spark, events_dir, _lake_dates(spark, events_dir, dates))


def _ids_at(spark, events_dir, have):
    """The ids of the lake's dates `have` (dates it has a directory for), or None if none."""
    if not have:
        return None
    return (spark.read.schema("id string, date string, node string")
            .option("basePath", events_dir)
            .parquet(*[os.path.join(events_dir, "date=" + d) for d in have]))


def _append_events(spark, rows, events_dir, dates, catalog):
    """Deduplicate rows on id, drop ids the lake holds for `dates`, append. Returns rows added."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F
    good = rows.select(*catalog.columns, "source_file", "date").dropDuplicates(["id"])
    old = _lake_ids(spark, events_dir, dates)
    if old is not None:
        good = good.join(old.select("id"), "id", "left_anti")
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
    deferred = _deferred(catalog) if _local(staging) else {}
    # No observed counts in the staging job: an observation is evaluated row by row
    # outside code generation and cost more than the small jobs below that count instead.
    tasks = TASKS_PER_CORE * spark.sparkContext.defaultParallelism
    fs, root = _fs(spark, staging)
    stats["batches"] += 1
    try:
        for check in (deferred, None):
            df, cols = stage_rows(lines, catalog, check or ())
            with _session_conf(spark, {"spark.sql.files.minPartitionNum": str(tasks)}):
                _write(df.selectExpr(*cols), staging)
            parts = _partitions(spark, staging)
            ids, staged_bytes = _staged_ids(parts) if _local(staging) else (None, 0)
            if not check or _deferred_hold(spark, staging, parts, ids, catalog, check):
                break
            # A deferred field failed: stage the batch again with the whole fast check.
            stats["rechecked"] += 1
            fs.delete(root, True)
        dates = sorted({d for d, _, _ in parts})
        fast, repeated = (_count_ids(spark, staging, events_dir, dates, ids, staged_bytes)
                          if parts else (0, False))
        if repeated:
            staged_rows = (spark.read.schema(_staging_schema(catalog)).parquet(staging)
                           .where(F.col("date").isNotNull()))
            added = _append_events(spark, staged_rows, events_dir, dates, catalog)
        elif parts:
            _move_files(spark, parts, events_dir)
            added = fast
        else:
            added = 0
        lines_ = blank = valid = accepted = 0
        if fs.exists(spark._jvm.org.apache.hadoop.fs.Path(root, "date=" + NULL_PARTITION)):
            raw = (spark.read.schema(_staging_schema(catalog)).parquet(staging)
                   .where(F.col("date").isNull())
                   .select(F.col("id").alias("value"), "source_file"))
            keyed = raw.withColumn("key", _key())
            few = _few_lines(staging) if _local(staging) else None
            if few is None:
                # A long line comes without its text (value NULL): the Spark classifier's.
                few = [tuple(r) for r in keyed.select(
                    F.when(F.octet_length("value") <= DRIVER_LINE_BYTES, F.col("value"))
                    .alias("value"), "source_file", "key").limit(DRIVER_LINES + 1).collect()]
            if len(few) <= DRIVER_LINES:
                lines_, blank, valid, accepted = _check_on_driver(
                    spark, few, keyed, staging, lake, catalog, stats)
            else:
                lines_, blank, valid, accepted = _exact(spark, raw, staging, lake, catalog,
                                                        stats)
        stats["lines"] += fast + lines_
        stats["blank"] += blank
        stats["valid"] += fast + valid
        stats["accepted"] += added + accepted
        stats["duplicates"] += fast + valid - added - accepted
    finally:
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


def _count_ids(spark, staging, events_dir, dates, ids=None, staged_bytes=0):
    """Whether an id repeats among the staged valid rows or is already in the lake for
    `dates`, and how many staged valid rows there are.

    Args:
      ids, staged_bytes: the staged valid rows' ids if the driver read them, and the
        bytes of their files (_staged_ids); ids None: Spark reads them.
    Returns:
      (rows, repeated). 64-bit hashes of the ids are compared, not the ids; a collision
      only sends the batch down the exact dedupe.
    """
    from pyspark.sql import functions as F
    have = _lake_dates(spark, events_dir, dates)
    if ids is not None and _local(events_dir):
        stored = [f for d in have
                  for f in _parquet_files(os.path.join(_os_path(events_dir), "date=" + d))]
        if staged_bytes + sum(os.path.getsize(f) for f in stored) <= DRIVER_ID_BYTES:
            import numpy as np
            new = _id_hashes(ids)
            h = np.sort(np.concatenate((new, _id_hashes(_arrow_table(stored, ["id"]).column("id")))))
            return len(new), bool((h[1:] == h[:-1]).any())
    ids = (_ids(spark, staging).where(F.col("date").isNotNull())
           .select(F.xxhash64("id").alias("h"), F.lit(1).alias("new")))
    old = _ids_at(spark, events_dir, have)
    if old is not None:
        ids = ids.unionAll(old.select(F.xxhash64("id").alias("h"), F.lit(0).alias("new")))
    r = (ids.groupBy("h").agg(F.count(F.lit(1)).alias("n"), F.sum("new").alias("new"))
         .agg(F.sum("new").alias("rows"), F.max("n").alias("most")).first())
    return r["rows"] or 0, (r["most"] or 0) > 1



# The driver's side of a batch on a local lake (the staging table and the lake are on the
# driver's disk): PyArrow reads the few columns the small steps need, without a Spark job.

def _os_path(path):
    """The local filesystem path of a local lake path (plain or file: URI)."""
    if path.startswith("file://"):
        return path[len("file://"):]
    return path[len("file:"):] if path.startswith("file:") else path


def _parquet_files(directory):
    """The Parquet data files under a local directory (as Spark lists them: no _ or .)."""
    out = []
    for base, dirs, files in os.walk(_os_path(directory)):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        out += [os.path.join(base, f) for f in sorted(files)
                if f.endswith(".parquet") and not f.startswith(("_", "."))]
    return out


def _arrow_table(files, columns):
    """Columns of local Parquet files as one pyarrow Table (strings read as they are
    stored: PyArrow does not check their UTF-8)."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    if not files:
        return pa.table({c: pa.array([], pa.string()) for c in columns})
    # One dataset reads the files in parallel (a read per file took twice as long).
    return ds.dataset(files, format="parquet").to_table(columns=columns)


def _staged_ids(parts):
    """(the ids of the staged valid rows as a pyarrow ChunkedArray, the bytes of their
    files); the ids None when the files hold more than DRIVER_ID_BYTES. One listing and
    one read serve the deferred checks and the repeat check."""
    files = [f for _, _, p in parts for f in _parquet_files(p)]
    size = sum(os.path.getsize(f) for f in files)
    if size > DRIVER_ID_BYTES:
        return None, size
    return _arrow_table(files, ["id"]).column("id"), size


def _deferred_hold(spark, staging, parts, ids, catalog, deferred):
    """Whether every staged valid row passes the checks the fast check left out
    (_deferred): its value matches the pattern and is not STRINGIFIED (a number or bool
    the parse read as text; the raw line that could prove otherwise is not staged).

    Args:
      parts: the staged valid partitions (_partitions).
      ids: their ids (_staged_ids), or None: a Spark job then reads them.
      deferred: {field: pattern body}.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    for f, body in deferred.items():
        if f == "node":
            # A partition column: its values are the partition names; an empty value
            # would be Hive's null partition, which the pattern admits.
            if not all(n != NULL_PARTITION and re.fullmatch(body, n)
                       and not re.fullmatch(STRINGIFIED, n) for _, n, _ in parts):
                return False
        elif f == "id" and ids is not None:
            # RE2 ("$" is the end of the text) where numpy cannot tell: a value with a
            # byte outside ASCII, and the values that start like a STRINGIFIED text.
            def match(values, p):
                return pc.match_substring_regex(values, "^(?:%s)$" % p)
            fits, maybe = _class_scan(ids, body)
            if fits is None:
                fits = pc.all(match(ids, body), min_count=0).as_py()
            if not fits or pc.any(match(ids.filter(pa.array(maybe)), STRINGIFIED),
                                  min_count=0).as_py():
                return False
        elif parts:
            bad = (spark.read.schema(_staging_schema(catalog)).parquet(staging)
                   .where("date IS NOT NULL")
                   .where("NOT coalesce(%s, false)" % _proved_sql(_q(f), body)))
            if bad.limit(1).count():
                return False
    return True


def _string_buffers(array):
    """(offsets from 0, bytes) of the strings of a pyarrow string Array, as numpy views of
    its Arrow buffers (a slice gives its own strings only)."""
    import numpy as np
    import pyarrow as pa
    array = array.cast(pa.string())         # 32-bit offsets (a no-op when it has them)
    if len(array) == 0:
        return np.zeros(1, np.int64), np.zeros(0, np.uint8)
    bufs = array.buffers()
    off = np.frombuffer(bufs[1], dtype=np.int32)[array.offset:array.offset + len(array) + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return off.astype(np.int64) - off[0], data[off[0]:off[-1]]


def _class_scan(column, body):
    """Numpy over the Arrow buffers of a string ChunkedArray: a pattern body of one
    character class repeated (_CLASS_PATTERN) checked as a table of the ASCII bytes it
    admits and bounds on the lengths.

    Returns:
      (fits, maybe): fits whether every value matches body (False if one is null), None
      if a value holds a byte outside ASCII (the caller asks a regex); maybe a numpy bool
      mask of the values that start with a character of STRINGIFIED_FIRST.
    """
    import numpy as np
    cls, lo, hi = _CLASS_PATTERN.fullmatch("^%s$" % body).groups()
    lo, hi = int(lo), int(hi or lo)
    table = np.zeros(256, bool)
    table[:128] = [re.fullmatch(cls, chr(b)) is not None for b in range(128)]
    first = np.zeros(256, bool)
    first[[ord(c) for c in STRINGIFIED_FIRST]] = True
    fits, maybe = column.null_count == 0, [np.zeros(0, bool)]
    for a in column.chunks:
        off, data = _string_buffers(a)
        lens = np.diff(off)
        if fits is not False and (data >= 128).any():
            fits = None
        elif fits and len(a) and not (table[data].all() and lo <= lens.min() and lens.max() <= hi):
            fits = False
        starts = np.minimum(off[:-1], max(len(data) - 1, 0))
        maybe.append((lens > 0) & first[data[starts]] if len(data) else lens > 0)
    return fits, np.concatenate(maybe)


# Odd 64-bit multipliers, one per byte position of an id (ids are at most 128 bytes by the
# schema; longer ones wrap around): fixed, so a batch's hashes compare with each other.
_ID_WEIGHTS = None


def _id_hashes(column, chunk=1 << 18):
    """64-bit hashes of the strings of a pyarrow string ChunkedArray (numpy uint64):
    the sum of each byte times its position's multiplier, mod 2^64, mixed with the length.
    Equal strings hash equal; a collision of two ids only sends the batch down the exact
    dedupe."""
    global _ID_WEIGHTS
    import numpy as np
    if _ID_WEIGHTS is None:
        rnd = np.random.default_rng(0x7455)
        _ID_WEIGHTS = rnd.integers(0, 1 << 62, size=256, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    out = [np.zeros(0, np.uint64)]
    for a in column.chunks:
        for start in range(0, len(a), chunk):
            c = a.slice(start, chunk)
            if len(c) == 0:
                continue
            off, data = _string_buffers(c)
            lens = np.diff(off)
            pos = (np.arange(len(data)) - np.repeat(off[:-1], lens)) % len(_ID_WEIGHTS)
            terms = np.append(data.astype(np.uint64) * _ID_WEIGHTS[pos], np.uint64(0))
            h = np.add.reduceat(terms, off[:-1])
            h[lens == 0] = 0          # reduceat gives the next term for an empty range
            out.append(h ^ (lens.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)))
    return np.concatenate(out)


def _staging_schema(catalog):
    from pyspark.sql import types as T
    st = S.spark_struct(catalog)
    return T.StructType(list(st.fields) + [T.StructField("source_file", T.StringType()),
                                           T.StructField("date", T.StringType())])


def _key(value="value"):
    """The quarantine key of a line: SHA-256 of its file and its raw text."""
    from pyspark.sql import functions as F
    return F.sha2(F.concat_ws("\n", "source_file", value), 256)


QUARANTINE_SCHEMA = ("raw string, source_file string, reason string, reasons array<string>, "
                     "key string")


def _quarantine(spark, rows, lake, stats):
    """Append quarantine rows (QUARANTINE_SCHEMA, one per key) the lake does not have.

    Args:
      rows: a DataFrame, or a list of tuples (the driver's check: on a local lake with a
        quarantine of at most DRIVER_ID_BYTES, written with PyArrow, no Spark job).
    """
    from pyspark.sql import Observation
    from pyspark.sql import functions as F
    quarantine_dir = os.path.join(lake, "quarantine")
    if isinstance(rows, list):
        if _local(lake) and _arrow_quarantine(rows, _os_path(quarantine_dir), stats):
            return
        rows = spark.createDataFrame(rows, QUARANTINE_SCHEMA)
    rows = rows.withColumn("ingested_at", F.current_timestamp())
    if _exists(spark, quarantine_dir):
        old = spark.read.parquet(quarantine_dir).select("key")
        rows = rows.join(old, "key", "left_anti")
    obs = Observation("quarantined")
    (rows.select("raw", "source_file", "reason", "reasons", "key", "ingested_at")
     .observe(obs, F.count(F.lit(1)).alias("rows")).write.mode("append").parquet(quarantine_dir))
    stats["quarantined_new"] += obs.get["rows"]


def _arrow_quarantine(rows, quarantine_dir, stats):
    """_quarantine of a list of rows with PyArrow (local lake). Returns False, writing
    nothing, when the quarantine's files hold more than DRIVER_ID_BYTES (Spark's job)."""
    import datetime as dt
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    files = _parquet_files(quarantine_dir) if os.path.isdir(quarantine_dir) else []
    if sum(os.path.getsize(f) for f in files) > DRIVER_ID_BYTES:
        return False
    cols = list(zip(*rows))
    table = pa.table({
        "raw": pa.array(cols[0], pa.string()), "source_file": pa.array(cols[1], pa.string()),
        "reason": pa.array(cols[2], pa.string()),
        "reasons": pa.array([list(x) for x in cols[3]], pa.list_(pa.string())),
        "key": pa.array(cols[4], pa.string())})
    if files:
        have = _arrow_table(files, ["key"]).column("key").combine_chunks()
        table = table.filter(pc.invert(pc.is_in(table.column("key"), value_set=have)))
    if table.num_rows:
        now = dt.datetime.now(dt.timezone.utc)
        table = table.append_column("ingested_at", pa.array([now] * table.num_rows,
                                                            pa.timestamp("us", tz="UTC")))
        os.makedirs(quarantine_dir, exist_ok=True)
        name = "part-%s-driver.snappy.parquet" % uuid.uuid4().hex
        # Written under a hidden name and renamed: a reader never sees half a file.
        pq.write_table(table, os.path.join(quarantine_dir, "." + name), compression="snappy")
        os.rename(os.path.join(quarantine_dir, "." + name), os.path.join(quarantine_dir, name))
    stats["quarantined_new"] += table.num_rows
    return True


def _few_lines(staging):
    """The staged lines to check again, read with PyArrow for the driver's check: a list
    of (value, source_file, key) as `keyed` gives them (value None over
    DRIVER_LINE_BYTES), or None to collect them with Spark (more than DRIVER_LINES lines,
    or more text than DRIVER_LINES lines of DRIVER_LINE_BYTES)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    files = _parquet_files(os.path.join(_os_path(staging), "date=" + NULL_PARTITION))
    rows = text = 0
    for f in files:
        md = pq.ParquetFile(f).metadata
        rows += md.num_rows
        text += sum(md.row_group(g).column(c).total_uncompressed_size
                    for g in range(md.num_row_groups) for c in range(md.num_columns)
                    if md.row_group(g).column(c).path_in_schema == "id")
    if rows > DRIVER_LINES or text > DRIVER_LINES * DRIVER_LINE_BYTES:
        return None
    # Bytes, as Spark holds them: the key hashes the line's own bytes, and a line that is
    # not UTF-8 decodes with U+FFFD, which schema.verdict leaves to Spark.
    t = _arrow_table(files, ["id", "source_file"])
    out = []
    for line, source_file in zip(t.column("id").cast(pa.binary()).to_pylist(),
                                 t.column("source_file").to_pylist()):
        key = hashlib.sha256(source_file.encode("utf-8") + b"\n" + line).hexdigest()
        value = line.decode("utf-8", "replace") if len(line) <= DRIVER_LINE_BYTES else None
        out.append((value, source_file, key))
    return out


def _typed(spark, good, catalog):
    """Staged-shape rows of (value, source_file) pairs of valid lines."""
    from pyspark.sql import functions as F
    df = spark.createDataFrame(good, "value string, source_file string")
    t = df.select(F.from_json("value", S.spark_struct(catalog), JSON_OPTIONS).alias("_t"),
                  "source_file")
    return t.selectExpr(*["_t.%s AS %s" % (_q(c), _q(c)) for c in catalog.columns],
                        "source_file", "%s AS date" % date_sql("_t.ts"))


def _check_on_driver(spark, rows, keyed, staging, lake, catalog, stats):
    """The exact check of a few lines in the driver: schema.verdict gives the reasons the
    Spark classifier gives; the lines it leaves to Spark (schema.UNSURE) go to _exact.

    Args:
      rows: the lines, (value, source_file, key) tuples of `keyed` (value None for a line
        over DRIVER_LINE_BYTES: it goes to _exact).
      keyed: DataFrame(value, source_file, key) of the lines (key: _key()).
      staging: the batch's staging directory.
    Returns:
      (lines, blank, valid, accepted) as _exact.
    """
    from pyspark.sql import functions as F
    lines = blank = valid = 0
    good, bad, unsure, dates = [], {}, [], set()
    for value, source_file, key in rows:
        v = S.UNSURE if value is None else S.verdict(value, catalog)
        if v == S.UNSURE:
            unsure.append(key)
            continue
        lines += 1
        if v is None:
            blank += 1
        elif not v[1]:
            valid += 1
            good.append((value, source_file))
            dates.add(_utc_date(v[0]["ts"]))
        else:
            reason = v[1][0]
            stats["reasons"][reason] = stats["reasons"].get(reason, 0) + 1
            stats["quarantined"] += 1
            bad.setdefault(key, (value, source_file, reason, v[1], key))
    accepted = 0
    if good:
        accepted = _append_events(spark, _typed(spark, good, catalog),
                                  os.path.join(lake, "events"), sorted(dates), catalog)
    if bad:
        _quarantine(spark, list(bad.values()), lake, stats)
    if unsure:
        more = _exact(spark, keyed.where(F.col("key").isin(unsure)).drop("key"), staging,
                      lake, catalog, stats)
        lines, blank, valid, accepted = (a + b for a, b in zip(
            (lines, blank, valid, accepted), more))
    return lines, blank, valid, accepted


def _exact(spark, raw, staging, lake, catalog, stats):
    """Run the exact classifier on lines the fast check did not prove valid: blank lines
    are counted, valid ones join the events, the rest go to the quarantine.

    Args:
      raw: DataFrame(value, source_file) of the lines.
      staging: the batch's staging directory (the classifier's result goes there).
    Returns:
      (lines, blank, valid, accepted): the lines looked at, how many were blank and valid,
      and how many of the valid ones were new to the lake.
    """
    from pyspark.sql import functions as F
    classified = os.path.join(staging, CLASSIFIED)
    # The classifier's expressions are large and planning them costs more than running
    # them on a few lines: one job classifies and writes the result, the queries below
    # read that small table.
    (classify(raw, catalog)
     .withColumn("date", F.when(F.col("_reason").isNull() & ~F.col("blank"),
                                F.expr(date_sql("ts"))))
     .write.mode("overwrite").parquet(classified))
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
        added = _append_events(spark, good, os.path.join(lake, "events"), sorted(dates),
                               catalog)
    if bad:
        _quarantine(spark, c.where(F.col("_reason").isNotNull())
                    .select(F.col("value").alias("raw"), "source_file",
                            F.col("_reason").alias("reason"),
                            F.col("_reasons").alias("reasons"), _key().alias("key"))
                    .dropDuplicates(["key"]), lake, stats)
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
