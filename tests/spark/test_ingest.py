"""Ingest: schema enforcement, quarantine reasons, idempotence, v1 -> v2 evolution."""
import json
import os

import pytest

from scenario import Scenario, hexid, line
from test_schema_contract import BAD_LINES, GOOD_LINES, _emit_all, _with
from tssb_spark import ingest, schema


def _small(sc=None):
    sc = sc or Scenario()
    sc.emit("a", 0, "tx", kind="entry", length=120, airtime_ms=70.0, pkt="11" * 8)
    sc.emit("b", 100, "rx", kind="entry", length=120, pkt="11" * 8, rssi=-90.0)
    sc.emit("a", 86400000, "want", n=2)          # next day: another date partition
    sc.emit("b", 200, "goset", count=1, state=hexid("a"))
    return sc


def test_spark_and_python_validators_agree(spark):
    from pyspark.sql import functions as F
    lines = [l for l, _ in BAD_LINES] + GOOD_LINES
    df = spark.createDataFrame([(l, "mem") for l in lines], "value string, source_file string")
    got = {r["value"]: list(r["_reasons"]) for r in
           ingest.classify(df, schema.Catalog()).select("value", "_reasons").collect()}
    for l, expected in BAD_LINES:
        assert got[l] == expected, l
        assert schema.validate_line(l, schema.Catalog())[1] == expected
    for l in GOOD_LINES:
        assert got[l] == [], l
    # Typed values of a valid line survive the parse.
    row = (ingest.classify(df, schema.Catalog()).where(F.col("value") == GOOD_LINES[2])
           .select("v", "freq_khz", "rssi", "node").first())
    assert (row["v"], row["freq_khz"], row["rssi"], row["node"]) == (2, 868300, -120.0, "n")


# Lines built to slip past a single typed parse: each hides a key or a type behind
# something the JSON parser forgives. The fast check must send every one to the exact check.
TRICKY = [
    _with(node=5, event="tx", n=KeyError, kind="entry", length=1, airtime_ms="NaN"),
    _with(node=5, event="rx", n=KeyError, kind="entry", length=1, rssi="-1"),
    _with() + " 5}",
    _with()[:-1] + ', "zz": {"n": 2}}',           # nested unknown key
    _with(n={"a": 1}),
    _with(n=None),
    _with(own=True),                              # a known field the event does not allow
    _with(node=True),
    _with(id=["a"]),
    "{'v': 1, 'id': 'n:r:1', 'ts': 1735689600000, 'node': 'n', 'event': 'want', 'n': 2}",
    _with(event="sync_done", n=KeyError, proto="setu", peer="ab" * 32, ok=True, reason=7,
          mode='"'),
    _with(event="tx", n=KeyError, kind="entry", length=2147483648, airtime_ms=1.0),
    _with(event="drop", n=KeyError, reason="a\\u0022b"),
    _with(v=2 ** 31 - 1),                         # overflows must not fail the job
    _with(v=-2 ** 31),
    _with(ts=2 ** 63 - 1),
    _with(ts=-2 ** 63),
    _with(event="tx", n=KeyError, kind="entry", length=1, airtime_ms=1e308),
    _with(n=1.0),                                 # an int written as a float
    _with(n=2147483648),                          # 10 digits: beyond the regex's int
    _with()[:-1] + ', "n": -1}',                  # a repeated key, the last one out of range
    _with(node="n\u00f6"),
    _with(ts=1735689600000.0),
    _with()[:-1] + ', "v": 1, "v": 9}',
    "\f" + _with(),
    _with() + "\t}",
    # Syntax errors that keep the line's commas and brace: the parse must give no column
    # of them (were the fields before the error kept, the first would count out right).
    _with(event="rx", n=KeyError, kind="entry", length=10, rssi=-90.0).replace(', "rssi"',
                                                                               ' "rssi"'),
    _with(event="rx", n=KeyError, kind="entry", length=10, rssi=-90.0).replace('"rssi":',
                                                                               '"rssi"'),
    _with()[:-1] + ",}",
]
# Valid lines the fast check leaves to the exact one: a null value, more pairs than an
# event has fields, a key written twice, blanks after the object, a string value that a
# number could have become (the raw line writes it apart from its key).
SLOW_GOOD = [
    _with(event="tx", n=KeyError, kind="entry", length=1, airtime_ms=1.0, dmx=None),
    _with()[:-1] + "," + ", ".join('"n": 1' for _ in range(40)) + "}",
    _with()[:-1] + ', "n": 3}',
    _with() + "  ",
    _with(node="12").replace('"node": "12"', '"node" :"12"'),
]
# Valid lines it takes although a single typed parse could hide something in them:
# escaped characters (the parse decodes them as Python does), a 10-digit int, string values
# that look like numbers but sit next to their key in the raw line.
FAST_GOOD = [
    _with().replace('"n:r:1"', '"n:r\\u003a1"'),
    _with().replace('"node": "n"', '"node": "\\u006e"'),
    _with().replace('"node": "n"', '"\\u006eode": "n"'),
    _with(event="chunk", n=KeyError, feed="0f" * 32, seq=1, cnr=2147483647),
    _with(node="12"),
    json.dumps(json.loads(_with(node="12")), separators=(",", ":")),
    _with(event="rx", n=KeyError, kind="entry", length=1, pkt="1234567890123456"),
    _with(event="rx", n=KeyError, kind="entry", length=1, pkt="0234567890123456"),
]
# A repeated key: JSON's last value wins in Spark's parser and in Python's json alike.
REPEATED = SLOW_GOOD[2]
# ... unless the last value does not convert: Spark keeps the earlier one (the exact check
# accepts the line, Python's json says type:n; docs/spark.md, Left out). Not a fast line;
# schema.verdict leaves it to the Spark classifier.
REPEATED_BAD = _with()[:-1] + ', "n": "x"}'


def test_fast_check_accepts_only_what_the_exact_rules_accept(spark):
    cat = schema.Catalog()
    compact = [json.dumps(json.loads(l), separators=(",", ":")) for l in _emit_all()]
    lines = ([l for l, _ in BAD_LINES] + GOOD_LINES + TRICKY + SLOW_GOOD + FAST_GOOD
             + [REPEATED_BAD] + _emit_all() + compact)
    df = spark.createDataFrame([(l, "mem") for l in lines], "value string, source_file string")
    staged = {r["value"]: r for r in
              ingest.stage_rows(df, cat)[0].select("value", "_ok", "_t").collect()}
    fast = {l: r["_ok"] for l, r in staged.items()}
    exact = {r["value"]: list(r["_reasons"]) for r in
             ingest.classify(df, cat).select("value", "_reasons").collect()}
    for l in lines:
        if l != REPEATED_BAD:
            assert (exact[l] == []) == (schema.validate_line(l, cat)[1] == []), l
        if fast[l]:
            assert exact[l] == [] and schema.validate_line(l, cat)[1] == [], l
    # Everything the real writer produces takes the one-parse path, compact or not.
    assert all(fast[l] for l in _emit_all() + compact)
    assert not any(fast[l] for l in TRICKY)
    assert fast[GOOD_LINES[0]] and not fast[GOOD_LINES[1]] and not fast[GOOD_LINES[3]]
    assert all(exact[l] == [] and not fast[l] for l in SLOW_GOOD)
    assert all(exact[l] == [] and fast[l] for l in FAST_GOOD)
    assert staged[FAST_GOOD[0]]["_t"]["id"] == "n:r:1"
    assert exact[REPEATED_BAD] == [] and not fast[REPEATED_BAD]
    assert schema.validate_line(REPEATED, cat)[0]["n"] == 3
    assert schema.verdict(REPEATED, cat) == schema.verdict(REPEATED_BAD, cat) == schema.UNSURE


def test_quarantine_keeps_raw_line_file_and_reason(spark, tmp_path):
    sc = _small()
    bad = ["garbage {", line(v=1, id="a:x:1", ts=1735689600000, node="a", event="want", n=-5),
           line(v=1, id="a:x:2", ts=1735689600000, node="a", event="tx", kind="entry",
                length=10, airtime_ms=1.0, colour="red"), ""]
    src = sc.write(str(tmp_path / "in"), extra={"bad.jsonl": bad, "ignored.txt": ["nope"]})
    lake = str(tmp_path / "lake")
    stats = ingest.ingest(spark, src, lake, mode="batch")
    assert stats["lines"] == 4 + 4              # 4 events, 4 bad-file lines
    assert stats["blank"] == 1
    assert stats["valid"] == 4 and stats["accepted"] == 4 and stats["duplicates"] == 0
    assert stats["quarantined"] == 3 and stats["quarantined_new"] == 3
    assert stats["reasons"] == {"unparsable": 1, "range:n": 1, "unknown_field:colour": 1}
    q = {r["raw"]: r for r in ingest.read_quarantine(spark, lake).collect()}
    assert set(q) == set(bad[:3])
    assert q[bad[0]]["reason"] == "unparsable"
    assert q[bad[1]]["reasons"] == ["range:n"]
    assert all(r["source_file"].endswith("/in/bad.jsonl") for r in q.values())
    ev = ingest.read_events(spark, lake)
    assert sorted(r["id"] for r in ev.collect()) == ["a:r1:1", "a:r1:2", "b:r1:1", "b:r1:2"]
    # Partitioned by date and node.
    parts = sorted(os.path.relpath(d, os.path.join(lake, "events"))
                   for d, _, files in os.walk(os.path.join(lake, "events"))
                   if any(f.endswith(".parquet") for f in files))
    assert parts == ["date=2025-01-01/node=a", "date=2025-01-01/node=b", "date=2025-01-02/node=a"]
    runs = open(os.path.join(lake, "_ingest_runs.jsonl")).read().splitlines()
    assert json.loads(runs[-1])["accepted"] == 4


@pytest.mark.parametrize("driver_lines", [0, ingest.DRIVER_LINES])
def test_driver_and_spark_classifiers_give_the_same_lake(spark, tmp_path, monkeypatch,
                                                          driver_lines):
    """A few lines the fast check leaves are classified in the driver (schema.verdict),
    more by Spark's classifier (DRIVER_LINES = 0 forces it): same counts, reasons and rows."""
    monkeypatch.setattr(ingest, "DRIVER_LINES", driver_lines)
    long_bad = "x" * (ingest.DRIVER_LINE_BYTES + 1)     # the driver never holds its text
    long_good = _with(id="n:long") + " " * ingest.DRIVER_LINE_BYTES   # valid, not fast
    lines = ([l for l, _ in BAD_LINES] + GOOD_LINES + TRICKY + SLOW_GOOD + FAST_GOOD
             + ["", "  ", long_bad, long_good])   # not REPEATED_BAD: Python and Spark differ
    src = tmp_path / "in"
    src.mkdir()
    (src / "t.jsonl").write_text("\n".join(lines) + "\n")
    lake = str(tmp_path / "lake")
    st = ingest.ingest(spark, str(src), lake, mode="batch")
    cat = schema.Catalog()
    want = {}
    for l in lines:
        v = schema.validate_line(l, cat)
        if v is not None and v[1]:
            want[v[1][0]] = want.get(v[1][0], 0) + 1
    assert st["lines"] == len(lines) and st["blank"] == 2
    assert st["reasons"] == want and st["quarantined"] == sum(want.values())
    assert st["valid"] == len(lines) - 2 - st["quarantined"]
    q = {r["raw"]: r["reason"] for r in ingest.read_quarantine(spark, lake).collect()}
    assert q == {l: schema.validate_line(l, cat)[1][0] for l in lines
                 if schema.validate_line(l, cat) and schema.validate_line(l, cat)[1]}
    ids = sorted(r["id"] for r in ingest.read_events(spark, lake).collect())
    assert ids == sorted({schema.validate_line(l, cat)[0]["id"] for l in lines
                          if schema.validate_line(l, cat) and not schema.validate_line(l, cat)[1]})


@pytest.mark.parametrize("id_bytes", [0, ingest.DRIVER_ID_BYTES])
def test_reingest_adds_nothing(spark, tmp_path, monkeypatch, id_bytes):
    # The repeat check in Spark (0: every batch is over the driver's bound) and in the driver.
    monkeypatch.setattr(ingest, "DRIVER_ID_BYTES", id_bytes)
    sc = _small()
    src = sc.write(str(tmp_path / "in"), extra={"bad.jsonl": ["oops"]})
    # The same event twice in one file and again in another file.
    dup = sc.all_lines()[0]
    with open(os.path.join(src, "copy.jsonl"), "w") as f:
        f.write(dup + "\n" + dup + "\n")
    lake = str(tmp_path / "lake")
    first = ingest.ingest(spark, src, lake, mode="stream")
    assert first["accepted"] == 4 and first["duplicates"] == 2 and first["quarantined_new"] == 1
    second = ingest.ingest(spark, src, lake, mode="stream")
    assert second["lines"] == 0                 # the checkpoint knows the files
    # A batch run (no checkpoint) reads everything again and still adds nothing.
    third = ingest.ingest(spark, src, lake, mode="batch")
    assert third["lines"] == first["lines"] and third["valid"] == 6
    assert third["accepted"] == 0 and third["duplicates"] == 6
    assert third["quarantined"] == 1 and third["quarantined_new"] == 0
    assert ingest.read_events(spark, lake).count() == 4
    assert ingest.read_quarantine(spark, lake).count() == 1


@pytest.mark.parametrize("id_bytes", [0, ingest.DRIVER_ID_BYTES])
def test_deferred_field_checks_send_the_batch_back(spark, tmp_path, monkeypatch, id_bytes):
    """The staging job leaves the id and node patterns to the driver (DEFERRED_FIELDS);
    a value that fails them (or a number the parse read as text) has the batch staged
    again with the whole fast check, and the lake comes out as the exact rules say."""
    monkeypatch.setattr(ingest, "DRIVER_ID_BYTES", id_bytes)   # 0: a Spark job reads ids
    assert set(ingest._deferred(schema.Catalog())) == {"id", "node"}
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.jsonl").write_text(_with() + "\n" + _with(id="n:r:2") + "\n")
    lake = str(tmp_path / "lake")
    st = ingest.ingest(spark, str(src), lake, mode="batch")
    assert st["rechecked"] == 0 and st["accepted"] == 2
    cat = schema.Catalog()
    cases = [_with(id=12, node="m"), _with(id="n:r:3", node=5), _with(id="n:r:4", node=""),
             _with(id="a b", node="m"), _with(id="n:r:5", node="a%2Fb"),
             _with(id="n:r:6", node="12"), _with(id="7", node="m")]
    for k, l in enumerate(cases):
        one = tmp_path / ("in%d" % k)
        one.mkdir()
        (one / "c.jsonl").write_text(l + "\n")
        st = ingest.ingest(spark, str(one), lake, mode="batch")
        rec, reasons = schema.validate_line(l, cat)
        assert st["rechecked"] == 1, l
        assert st["accepted"] == (0 if reasons else 1), l
        assert st["reasons"] == {r: 1 for r in reasons}, l
    ids = sorted(r["id"] for r in ingest.read_events(spark, lake).collect())
    assert ids == ["7", "n:r:1", "n:r:2", "n:r:6"]


def test_driver_and_spark_quarantines_are_one_table(spark, tmp_path, monkeypatch):
    """Bad lines quarantined by Spark's classifier and by the driver (PyArrow) land in one
    table Spark reads; both key a line alike, a line that is not UTF-8 too, so a second
    run by the other way adds nothing."""
    src = tmp_path / "in"
    src.mkdir()
    not_utf8 = b'{"v":1,"id":"n:r:\xff","ts":1735689600000,"node":"n","event":"want"}'
    (src / "a.jsonl").write_bytes(b"oops\n" + not_utf8 + b"\n" + _with(n=-1).encode() + b"\n")
    lake = str(tmp_path / "lake")
    monkeypatch.setattr(ingest, "DRIVER_LINES", 0)          # Spark classifies and writes
    first = ingest.ingest(spark, str(src), lake, mode="batch")
    assert first["quarantined"] == 3 and first["quarantined_new"] == 3
    monkeypatch.setattr(ingest, "DRIVER_LINES", 20000)      # the driver, through PyArrow
    again = ingest.ingest(spark, str(src), lake, mode="batch")
    assert again["quarantined"] == 3 and again["quarantined_new"] == 0
    assert again["reasons"] == first["reasons"]
    (src / "b.jsonl").write_text("nope\n" + _with(n=-2) + "\n")
    third = ingest.ingest(spark, str(src), lake, mode="batch")
    assert third["quarantined_new"] == 2
    q = ingest.read_quarantine(spark, lake)
    rows = q.collect()
    assert len(rows) == 5 and len({r["key"] for r in rows}) == 5
    assert all(r["ingested_at"] is not None and r["reasons"] for r in rows)
    assert {r["reason"] for r in rows if r["source_file"].endswith("b.jsonl")} == {
        "unparsable", "range:n"}


def test_partitions_listed_alike_by_the_os_and_by_hadoop(spark, tmp_path, monkeypatch):
    staging = tmp_path / "staging"
    for d, n in [("2026-01-02", "b"), ("2026-01-01", "a"), ("2026-01-01", "c"),
                 (ingest.NULL_PARTITION, ingest.NULL_PARTITION)]:
        (staging / ("date=" + d) / ("node=" + n)).mkdir(parents=True)
    (staging / "_SUCCESS").write_bytes(b"")
    (staging / "date=2026-01-01" / "part-0.parquet").write_bytes(b"")
    (staging / "date=2026-01-01" / "other=x").mkdir()
    by_os = ingest._partitions(spark, str(staging))
    assert [(d, n) for d, n, _ in by_os] == [("2026-01-01", "a"), ("2026-01-01", "c"),
                                             ("2026-01-02", "b")]
    assert all(os.path.isdir(p) for _, _, p in by_os)
    assert ingest._partitions(spark, str(tmp_path / "none")) == []
    monkeypatch.setattr(ingest, "_local", lambda path: False)     # as on HDFS or S3
    by_hadoop = ingest._partitions(spark, "file:" + str(staging))
    assert sorted((d, n, p.replace("file:", "", 1)) for d, n, p in by_hadoop) == by_os
    assert ingest._partitions(spark, "file:" + str(tmp_path / "none")) == []


def test_id_hashes_equal_for_equal_ids_only():
    import pyarrow as pa
    ids = ["a", "", "node03:b:12", "x" * 300, "a", "x" * 299 + "y", "é:1", "node03:b:12"]
    arr = pa.chunked_array([pa.array(ids[:3]), pa.array(ids[3:])])
    for chunk in (1, 3, 1 << 18):
        h = ingest._id_hashes(arr, chunk=chunk)
        assert len(h) == len(ids)
        for i, a in enumerate(ids):
            for j, b in enumerate(ids):
                assert (h[i] == h[j]) == (a == b), (a, b)
    # A sliced array hashes its own strings, not its parent's first ones.
    assert list(ingest._id_hashes(pa.chunked_array([pa.array(ids).slice(2, 3)]))) == list(
        ingest._id_hashes(pa.chunked_array([pa.array(ids[2:5])])))


def test_stringified_texts_start_with_a_listed_character():
    import re
    samples = ["0", "-0", "7", "12", "-12", "1.5", "-0.25", "1e5", "1E+5", "-2.5e-3", "true",
               "false", "Infinity", "-Infinity", "NaN"]
    assert all(re.fullmatch(ingest.STRINGIFIED, s) for s in samples)
    # Each listed character starts one, no other makes one of any sample's tail.
    tails = {s[k:] for s in samples for k in range(len(s) + 1)}
    for c in map(chr, range(1, 128)):
        starts = any(re.fullmatch(ingest.STRINGIFIED, c + t) for t in tails)
        assert starts == (c in ingest.STRINGIFIED_FIRST), c


def test_class_scan_agrees_with_the_pattern():
    import random
    import re

    import pyarrow as pa
    import pyarrow.compute as pc
    body = "[A-Za-z0-9._:-]{1,12}"
    rnd = random.Random(7)
    alphabet = "ab:._-09Z %\u00e912eE+tINf"
    for _ in range(2000):
        values = ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 14)))
                  for _ in range(rnd.randint(0, 6))]
        values += rnd.sample(["12", "-1.5e3", "true", "NaN", "-Infinity", "t", "node:1"], 2)
        cut = rnd.randint(0, len(values))
        col = pa.chunked_array([pa.array(values[:cut], pa.string()),
                                pa.array(values[cut:], pa.string())]).slice(1)
        values = values[1:]
        fits, maybe = ingest._class_scan(col, body)
        want = all(re.fullmatch(body, v) for v in values)
        if fits is None:      # a byte outside ASCII: the caller asks a regex
            assert any(ord(ch) > 127 for v in values for ch in v)
        else:
            assert fits == want, values
        assert len(maybe) == len(values)
        # Every STRINGIFIED value is among those the mask keeps.
        assert all(maybe[i] for i, v in enumerate(values)
                   if re.fullmatch(ingest.STRINGIFIED, v)), values
    assert ingest._class_scan(pa.chunked_array([pa.array(["a", None])]), body)[0] is False
    assert pc.all(pa.array(ingest._class_scan(
        pa.chunked_array([pa.array(["x" * 13])]), body)[1])).as_py() is False


def test_stream_picks_up_new_files_only(spark, tmp_path):
    src = tmp_path / "in"
    sc = _small()
    sc.write(str(src))
    lake = str(tmp_path / "lake")
    assert ingest.ingest(spark, str(src), lake, max_files_per_trigger=1)["accepted"] == 4
    sc2 = Scenario()
    sc2.emit("c", 5, "want", n=1)
    sc2.write(str(src / "later"))
    st = ingest.ingest(spark, str(src), lake, max_files_per_trigger=1)
    assert st["lines"] == 1 and st["accepted"] == 1 and st["batches"] == 1
    assert ingest.read_events(spark, lake).count() == 5


def test_schema_evolution_v1_to_v2(spark, tmp_path):
    lake = str(tmp_path / "lake")
    old = Scenario()
    old.emit("a", 0, "tx", kind="entry", length=120, airtime_ms=70.0)
    old.emit("a", 10, "tx", kind="entry", length=120, airtime_ms=70.0, freq_khz=868300)
    ingest.ingest(spark, old.write(str(tmp_path / "old")), lake, mode="batch", max_version=1)
    # A v1-only ingest writes no v2 column and quarantines the v2 line.
    assert "freq_khz" not in ingest.read_events(spark, lake).columns
    assert [r["reason"] for r in ingest.read_quarantine(spark, lake).collect()] == \
        ["unknown_version"]
    new = Scenario()
    new.emit("b", 20, "rx", kind="entry", length=120, freq_khz=868100)
    new.emit("b", 30, "rx", kind="entry", length=120)
    st = ingest.ingest(spark, new.write(str(tmp_path / "new")), lake, mode="batch")
    assert st["accepted"] == 2
    rows = {r["id"]: r for r in ingest.read_events(spark, lake).collect()}
    assert rows["a:r1:1"]["freq_khz"] is None and rows["a:r1:1"]["v"] == 1
    assert rows["b:r1:1"]["freq_khz"] == 868100 and rows["b:r1:1"]["v"] == 2
    assert rows["b:r1:2"]["freq_khz"] is None
    # After the upgrade the old v2 line is accepted on re-ingest; v1 rows stay once.
    st = ingest.ingest(spark, str(tmp_path / "old"), lake, mode="batch")
    assert st["accepted"] == 1 and st["duplicates"] == 1
    assert ingest.read_events(spark, lake).count() == 4


def test_bad_arguments(spark, tmp_path):
    with pytest.raises(ValueError):
        ingest.ingest(spark, str(tmp_path / "missing"), str(tmp_path / "lake"))
    with pytest.raises(ValueError):
        ingest.ingest(spark, str(tmp_path), str(tmp_path / "lake"), mode="fast")


def test_live_file_lines_are_ingested_once_across_runs_and_rotation(spark, tmp_path):
    from tssb.context import EventLog
    src = tmp_path / "in"
    lake = str(tmp_path / "lake")
    log = EventLog(str(src / "logs" / "events.jsonl.live"), "h1",
                   clock=lambda: scenario_t0())
    for i in range(3):
        log.emit("want", n=i)
    live = log.path
    with open(live, "a") as f:
        f.write('{"v": 1, "id": "h1:x:1", "ts": 17356896')   # a line still being written
    st = ingest.ingest(spark, str(src), lake)
    assert st["lines"] == 3 and st["accepted"] == 3 and st["quarantined"] == 0
    assert ingest.ingest(spark, str(src), lake)["lines"] == 0       # nothing new
    with open(live, "a") as f:                                        # the line completes
        f.write('00000, "node": "h1", "event": "want", "n": 9}\n')
    log.emit("want", n=3)
    st = ingest.ingest(spark, str(src), lake)
    assert st["lines"] == 2 and st["accepted"] == 2
    log.emit("want", n=4)
    log.rotate()                     # closed by rename: the stream reads the whole file
    log.emit("want", n=5)
    st = ingest.ingest(spark, str(src), lake)
    assert st["accepted"] == 2 and st["duplicates"] == 5
    ev = ingest.read_events(spark, lake)
    assert sorted(r["n"] for r in ev.collect()) == [0, 1, 2, 3, 4, 5, 9]
    src_files = {r["source_file"] for r in ev.collect()}
    assert any(f.endswith("events.jsonl.live") for f in src_files)
    assert ingest.ingest(spark, str(src), lake, mode="batch")["accepted"] == 0


def scenario_t0():
    from scenario import T0
    return T0


def test_tricky_lines_go_through_a_whole_ingest(spark, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    lines = TRICKY + GOOD_LINES + SLOW_GOOD + FAST_GOOD
    (src / "t.jsonl").write_text("\n".join(lines) + "\n")
    st = ingest.ingest(spark, str(src), str(tmp_path / "lake"), mode="batch")
    assert st["lines"] == len(lines)
    assert st["valid"] + st["quarantined"] == st["lines"]
    assert st["quarantined"] == len(TRICKY)
    # the valid lines all have the id n:r:1
    assert st["valid"] == len(GOOD_LINES) + len(SLOW_GOOD) + len(FAST_GOOD)
    assert st["accepted"] == 1


def test_ingest_leaves_the_session_and_lake_as_it_found_them(spark, tmp_path):
    # The staging job's split setting is for that job only; an all-bad batch makes no
    # events directory; the staging directory (and the exact check's table) is removed.
    key = "spark.sql.files.minPartitionNum"
    src = tmp_path / "in"
    src.mkdir()
    (src / "bad.jsonl").write_text("garbage\n{\"v\": 1}\n")
    lake = str(tmp_path / "lake")
    assert spark.conf.get(key, None) is None
    st = ingest.ingest(spark, str(src), lake, mode="batch")
    assert st["quarantined"] == 2 and st["valid"] == 0
    assert spark.conf.get(key, None) is None
    assert not os.path.exists(os.path.join(lake, "events"))
    assert os.listdir(os.path.join(lake, ingest.STAGING)) == []
    spark.conf.set(key, "3")
    try:
        (src / "good.jsonl").write_text("\n".join(GOOD_LINES) + "\n")
        st = ingest.ingest(spark, str(src), lake, mode="batch")
        assert st["accepted"] == 1 and spark.conf.get(key) == "3"
    finally:
        spark.conf.unset(key)
    assert os.listdir(os.path.join(lake, ingest.STAGING)) == []


@pytest.mark.parametrize("check", [("pattern", "^[a-z,]{1,4}$"), ("pattern", "^(a|b)$"),
                                   ("enum", ["a}"])])
def test_fast_check_refuses_a_schema_whose_strings_may_hold_separators(monkeypatch, check):
    cat = schema.Catalog()
    orig = cat.field_checks
    monkeypatch.setattr(cat, "field_checks",
                        lambda f: [check] if f == "mode" else orig(f))
    with pytest.raises(schema.SchemaError):
        ingest.fast_check_sql(cat)
