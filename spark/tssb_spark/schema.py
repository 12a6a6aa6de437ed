"""The versioned event-log schema (`schema/events-v<N>.json`) and its rules.

The JSON files are the single source of truth: the Spark ingest builds its parse schema and
its validation expressions from them (ingest.py), and `validate_line` below applies the same
rules in plain Python (the single-process baseline of the benchmark, and a cross-check in
the tests: both must give the same reasons for the same line).

Rules, checked in this order; the first violation is the line's `reason`:
  1. "unparsable": not one JSON object per line (also: text after the closing brace, or two
     objects glued together, which happens when a serial line loses its newline)
  2. "missing_field:v" / "type:v" / "unknown_version" (v not a version this ingest knows)
  3. "missing_field:event" / "type:event" / "unknown_event" (not an event of version v)
  4. per field, in FIELD_ORDER, for the fields the event allows in version v:
     "missing_field:F" (required, absent or null), "type:F", "enum:F", "pattern:F",
     "range:F" (an impossible value)
  5. "unknown_field:K" for each key the event does not allow in version v (sorted)
Schema evolution: a later version may add events and optional fields; a field never
changes its type (tests check this over all files).
"""
import json
import os
import re

SCHEMA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schema")
NAME = "tssb-events"

INT32 = (-2 ** 31, 2 ** 31 - 1)
INT64 = (-2 ** 63, 2 ** 63 - 1)
# Two objects on one line: "}" then optional spaces then "{". No string field may contain
# a brace (every string field has a pattern), so in a valid line this never matches.
# ASCII spaces only, as Java's \s in the Spark classifier's same rule.
GLUED = re.compile(r"\}\s*\{", re.ASCII)
# JSON's whitespace (RFC 8259): what may surround the object. str.strip() would also take
# form feeds and other Unicode spaces, which no JSON parser (nor Spark's) accepts.
JSON_WS = " \t\r\n"


class SchemaError(Exception):
    """A schema file is missing or inconsistent."""


def versions():
    """Returns: the sorted list of schema versions present in SCHEMA_DIR."""
    out = []
    for name in os.listdir(SCHEMA_DIR):
        m = re.fullmatch(r"events-v(\d+)\.json", name)
        if m:
            out.append(int(m.group(1)))
    return sorted(out)


LATEST = max(versions())


def load(version):
    """Load one schema document.

    Args:
      version: schema version number.
    Returns:
      The parsed JSON document (dict).
    Raises:
      SchemaError: no such version, or the file names another version.
    """
    path = os.path.join(SCHEMA_DIR, "events-v%d.json" % version)
    if not os.path.exists(path):
        raise SchemaError("no schema version %d" % version)
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if doc.get("name") != NAME or doc.get("version") != version:
        raise SchemaError("schema file %s names version %r" % (path, doc.get("version")))
    return doc


class Catalog:
    """All schema versions 1..max_version as one rule set.

    Attributes:
      versions: accepted values of "v".
      fields: field name -> spec (type, enum, pattern, min, max, doc), union over versions.
      field_order: envelope fields, then every other field sorted by name; this is both
        the column order of the Parquet table and the order of the per-field checks.
      allowed / required: (version, event) -> tuple of field names (without envelope).
    """

    def __init__(self, max_version=None):
        max_version = LATEST if max_version is None else max_version
        self.max_version = max_version
        self.versions = [v for v in versions() if v <= max_version]
        if not self.versions:
            raise SchemaError("no schema versions up to %d" % max_version)
        self.fields = {}
        self.events = {}     # version -> tuple of event names
        self.allowed = {}
        self.required = {}
        for v in self.versions:
            doc = load(v)
            self.envelope = tuple(doc["envelope"])
            for name, spec in doc["fields"].items():
                old = self.fields.get(name)
                if old is not None and old["type"] != spec["type"]:
                    raise SchemaError("field %s changes type in v%d" % (name, v))
                self.fields[name] = spec
            self.events[v] = tuple(sorted(doc["events"]))
            for ev, spec in doc["events"].items():
                req = tuple(spec["required"])
                opt = tuple(spec["optional"])
                for f in req + opt:
                    if f not in doc["fields"] or f in self.envelope:
                        raise SchemaError("event %s names bad field %s" % (ev, f))
                self.allowed[(v, ev)] = req + opt
                self.required[(v, ev)] = req
        self.field_order = tuple(f for f in self.envelope if f not in ("v", "event")) + \
            tuple(sorted(f for f in self.fields if f not in self.envelope))
        self.columns = ("v", "id", "ts", "node", "event") + self.field_order[3:]
        self._regex = {f: re.compile(s["pattern"][1:-1]) for f, s in self.fields.items()
                       if "pattern" in s}

    def field_checks(self, name):
        """Returns: list of (kind, value) checks of a field after its type check."""
        s = self.fields[name]
        out = []
        if "enum" in s:
            out.append(("enum", s["enum"]))
        if "pattern" in s:
            out.append(("pattern", s["pattern"]))
        if "min" in s or "max" in s:
            out.append(("range", (s.get("min"), s.get("max"))))
        return out

    def validate(self, rec):
        """Check one decoded JSON object.

        Args:
          rec: the object (dict) decoded from a line.
        Returns:
          The list of violations (empty when the record is valid).
        """
        if "v" not in rec or rec["v"] is None:
            return ["missing_field:v"]
        if not _type_ok("int", rec["v"]):
            return ["type:v"]
        v = rec["v"]
        if v not in self.versions:
            return ["unknown_version"]
        ev = rec.get("event")
        if ev is None:
            return ["missing_field:event"]
        if not isinstance(ev, str):
            return ["type:event"]
        if ev not in self.events[v]:
            return ["unknown_event"]
        allowed = self.allowed[(v, ev)]
        required = self.required[(v, ev)]
        out = []
        for f in self.field_order:
            env = f in self.envelope
            if not env and f not in allowed:
                continue
            val = rec.get(f)
            if val is None:
                if env or f in required:
                    out.append("missing_field:" + f)
                continue
            spec = self.fields[f]
            if not _type_ok(spec["type"], val):
                out.append("type:" + f)
                continue
            if "enum" in spec and val not in spec["enum"]:
                out.append("enum:" + f)
            elif "pattern" in spec and not self._regex[f].fullmatch(val):
                out.append("pattern:" + f)
            elif ("min" in spec and val < spec["min"]) or ("max" in spec and val > spec["max"]):
                out.append("range:" + f)
        known = set(self.envelope) | set(allowed)
        for k in sorted(rec):
            if k not in known:
                out.append("unknown_field:" + k)
        return out


def _type_ok(kind, val):
    if isinstance(val, bool):
        return kind == "bool"
    if kind == "int":
        return isinstance(val, int) and INT32[0] <= val <= INT32[1]
    if kind == "long":
        return isinstance(val, int) and INT64[0] <= val <= INT64[1]
    if kind == "double":
        return isinstance(val, (int, float))
    if kind == "string":
        return isinstance(val, str)
    return False


def _no_constants(name):
    # NaN / Infinity are not JSON; Spark is told the same (allowNonNumericNumbers=false).
    raise ValueError("non-JSON constant " + name)


def parse_line(line, strict=False):
    """Decode one line the way the ingest does.

    Args:
      line: the raw line (str, without its newline).
      strict: raise _Unsure where Spark's parser may read the line otherwise (verdict).
    Returns:
      None for a blank line, else (dict or None): None when the line is unparsable.
    """
    text = line.strip(JSON_WS)
    if not text:
        return None
    if not text.endswith("}") or GLUED.search(text):
        return (None,)
    hooks = dict(object_pairs_hook=_unique_pairs, parse_int=_PARSE_INT,
                 parse_float=_PARSE_FLOAT) if strict else {}
    try:
        rec = json.loads(text, parse_constant=_no_constants, **hooks)
    except ValueError:
        return (None,)
    if not isinstance(rec, dict):
        return (None,)
    return (rec,)


class _Unsure(Exception):
    """The line is one Spark's JSON parser may read otherwise than Python's (verdict)."""


# verdict() leaves to Spark: lines longer than this, or with a number written with more
# characters than this (Jackson refuses numbers over 1000 characters, Python's int()
# over 4300 digits), ...
VERDICT_MAX_LINE = 100000
VERDICT_MAX_NUMBER = 100
# ... and lines holding U+FFFD: the text a bad UTF-8 byte becomes, whose count may differ
# between decoders (and the raw line must keep its bytes).
REPLACEMENT_CHAR = "\ufffd"
UNSURE = "unsure"


def _unique_pairs(pairs):
    d = dict(pairs)
    if len(d) != len(pairs):
        raise _Unsure()  # a repeated key: Spark's typed parse keeps the last value that
    return d             # converts, its map parse the first; Python the last


def _bounded(kind):
    def parse(text):
        if len(text) > VERDICT_MAX_NUMBER:
            raise _Unsure()
        return kind(text)
    return parse


_PARSE_INT = _bounded(int)
_PARSE_FLOAT = _bounded(float)


def verdict(line, catalog):
    """validate_line for the lines whose reasons Spark's exact classifier is known to give
    too (the ingest classifies a few suspect lines here instead of in Spark).

    Args:
      line: the raw line (str).
      catalog: a Catalog.
    Returns:
      None for a blank line, (record or None, violations) as validate_line, or UNSURE for
      a line Spark's parser may read otherwise: a key repeated in an object, nesting deep
      enough for Python's recursion limit, a number or line longer than the bounds above,
      U+FFFD, or a violation naming a non-ASCII key. Such lines take the Spark classifier.
    """
    if len(line) > VERDICT_MAX_LINE or REPLACEMENT_CHAR in line:
        return UNSURE
    try:
        v = validate_line(line, catalog, strict=True)
    except (_Unsure, RecursionError):
        return UNSURE
    if v is not None and not all(r.isascii() for r in v[1]):
        return UNSURE
    return v


def validate_line(line, catalog, strict=False):
    """Validate one raw line.

    Args:
      line: the raw line (str).
      catalog: a Catalog.
      strict: as parse_line's.
    Returns:
      None for a blank line, else (record or None, list of violations).
    """
    p = parse_line(line, strict)
    if p is None:
        return None
    rec = p[0]
    if rec is None:
        return None, ["unparsable"]
    return rec, catalog.validate(rec)


def spark_type(kind):
    """Map a schema type name to a Spark SQL type (imports pyspark lazily)."""
    from pyspark.sql import types as T
    return {"int": T.IntegerType(), "long": T.LongType(), "double": T.DoubleType(),
            "bool": T.BooleanType(), "string": T.StringType()}[kind]


def spark_struct(catalog):
    """Returns: the explicit Spark StructType of a line (envelope + all fields)."""
    from pyspark.sql import types as T
    return T.StructType([T.StructField(c, spark_type(catalog.fields[c]["type"]), True)
                         for c in catalog.columns])

