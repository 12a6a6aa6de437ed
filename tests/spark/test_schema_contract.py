"""The schema files, the EventLog writer and the Python validator agree (no Spark)."""
import io
import json

import pytest

from tinyssb import eventlog
from tssb_spark import schema as S

FEED = bytes(range(32))
# One valid call per event, through the real writer.
SAMPLES = {
    "tx": dict(kind="entry", length=120, airtime_ms=71.5, dmx=b"\x01" * 7, pkt=b"\x02" * 8),
    "rx": dict(kind="goset", length=105, rssi=-97.5, snr=6.25, src="n2", pkt="ab" * 8),
    "drop": dict(reason="bad crc", length=40),
    "append": dict(feed=FEED, seq=1, origin_ts=eventlog.VIRTUAL_EPOCH_MS, own=True),
    "chunk": dict(feed=FEED, seq=3, cnr=0),
    "goset": dict(count=4, state=FEED),
    "want": dict(n=2),
    "duty_wait": dict(wait_ms=1500),
    "store_full": dict(feed=FEED),
    "sync_start": dict(proto="setu", peer=FEED),
    "sync_done": dict(proto="trdag", peer=FEED, ok=False, mode="bft", rounds=3, bytes_sent=10,
                      bytes_recv=20, msgs_sent=1, msgs_recv=2, elements_sent=0,
                      elements_recv=5, duration_ms=12.5, reason="peer closed"),
}


def _emit_all():
    buf = io.StringIO()
    log = eventlog.EventLog("n1", eventlog.line_writer(buf), lambda: eventlog.VIRTUAL_EPOCH_MS,
                            run="r")
    for ev, fields in SAMPLES.items():
        log.emit(ev, **fields)
    log.emit("tx", kind="chnk", length=120, airtime_ms=60.0, freq_khz=868300)
    return buf.getvalue().splitlines()


def test_writer_event_table_matches_latest_schema():
    doc = S.load(S.LATEST)
    assert set(eventlog.EVENTS) == set(doc["events"])
    for ev, (req, opt) in eventlog.EVENTS.items():
        assert list(req) == doc["events"][ev]["required"], ev
        assert list(opt) == doc["events"][ev]["optional"], ev
    assert list(eventlog.ENVELOPE) == doc["envelope"]
    assert eventlog.SCHEMA_VERSION == S.LATEST
    v1 = S.load(1)
    v1_fields = set(v1["fields"])
    assert set(eventlog.V2_FIELDS) == set(doc["fields"]) - v1_fields


def test_every_event_sample_is_covered():
    assert set(SAMPLES) == set(eventlog.EVENTS)


def test_writer_output_validates_against_schema_file():
    cat = S.Catalog()
    lines = _emit_all()
    assert len(lines) == len(SAMPLES) + 1
    for line in lines:
        rec, reasons = S.validate_line(line, cat)
        assert reasons == [], (line, reasons)
    assert json.loads(lines[-1])["v"] == 2
    # The v1 lines also pass a v1-only ingest; the v2 line is refused there.
    cat1 = S.Catalog(1)
    assert [S.validate_line(l, cat1)[1] for l in lines[:-1]] == [[]] * len(SAMPLES)
    assert S.validate_line(lines[-1], cat1)[1] == ["unknown_version"]


def test_versions_only_add_optional_fields():
    vs = S.versions()
    assert vs[0] == 1 and vs == list(range(1, len(vs) + 1))
    for a, b in zip(vs, vs[1:]):
        old, new = S.load(a), S.load(b)
        for f, spec in old["fields"].items():
            assert new["fields"][f]["type"] == spec["type"], f
        for ev, spec in old["events"].items():
            assert new["events"][ev]["required"] == spec["required"], ev
            assert set(spec["optional"]) <= set(new["events"][ev]["optional"]), ev
        for ev in set(new["events"]) & set(old["events"]):
            added = set(new["events"][ev]["optional"]) - set(old["events"][ev]["optional"])
            assert not added & set(new["events"][ev]["required"])


def test_every_field_is_documented_and_string_fields_have_patterns():
    doc = S.load(S.LATEST)
    for f, spec in doc["fields"].items():
        assert spec.get("doc"), f
        assert spec["type"] in ("int", "long", "double", "bool", "string"), f
        if spec["type"] == "string" and f != "event":
            # Patterns keep quotes and braces out of strings: ingest relies on it.
            assert "pattern" in spec or "enum" in spec, f


def test_docs_list_every_event_and_field():
    import os
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    text = open(os.path.join(root, "docs", "events.md"), encoding="utf-8").read()
    doc = S.load(S.LATEST)
    for name in list(doc["events"]) + list(doc["fields"]):
        assert "`%s`" % name in text, name


GOOD = dict(v=1, id="n:r:1", ts=1735689600000, node="n", event="want", n=2)


def _with(**kw):
    rec = dict(GOOD)
    for k, v in kw.items():
        if v is KeyError:
            rec.pop(k)
        else:
            rec[k] = v
    return json.dumps(rec)


# (line, expected reasons): shared with the Spark agreement test in test_ingest.py.
BAD_LINES = [
    ("not json", ["unparsable"]),
    ("[1, 2]", ["unparsable"]),
    (_with() + " trailing", ["unparsable"]),
    (_with() + _with(), ["unparsable"]),
    ('{"v": 1, "n": NaN}', ["unparsable"]),
    (_with(v=KeyError), ["missing_field:v"]),
    (_with(v="1"), ["type:v"]),
    (_with(v=1.0), ["type:v"]),
    (_with(v=True), ["type:v"]),
    (_with(v=9), ["unknown_version"]),
    (_with(event=KeyError, n=KeyError), ["missing_field:event"]),
    (_with(event=3), ["type:event"]),
    (_with(event="reboot"), ["unknown_event"]),
    (_with(id=KeyError), ["missing_field:id"]),
    (_with(id=None), ["missing_field:id"]),
    (_with(ts=1.5), ["type:ts"]),
    (_with(ts="1735689600000"), ["type:ts"]),
    (_with(ts=5), ["range:ts"]),
    (_with(ts=2 ** 70), ["type:ts"]),
    (_with(node=5), ["type:node"]),
    (_with(node="a/b"), ["pattern:node"]),
    (_with(node="a\n"), ["pattern:node"]),
    (_with(n=KeyError), ["missing_field:n"]),
    (_with(n=-1), ["range:n"]),
    (_with(n=2 ** 40), ["type:n"]),
    (_with(n=True), ["type:n"]),
    (_with(n={"x": 1}), ["type:n"]),
    (_with(extra=1, zz=2), ["unknown_field:extra", "unknown_field:zz"]),
    (_with(dmx="00" * 7), ["unknown_field:dmx"]),
    (_with(event="tx", n=KeyError, kind="entry", length=300, airtime_ms=-1.0),
     ["range:airtime_ms", "range:length"]),
    (_with(event="tx", n=KeyError, kind="bogus", length=10, airtime_ms="NaN"),
     ["type:airtime_ms", "enum:kind"]),
    (_with(event="rx", n=KeyError, kind="entry", length=10, freq_khz=868300),
     ["unknown_field:freq_khz"]),
    (_with(v=2, event="rx", n=KeyError, kind="entry", length=10, freq_khz=1),
     ["range:freq_khz"]),
    (_with(event="sync_done", n=KeyError, proto="setu", peer="AB" * 32, ok="yes"),
     ["type:ok", "pattern:peer"]),
    (_with(event="drop", n=KeyError, reason='x"y{'), ["pattern:reason"]),
]
GOOD_LINES = [
    _with(),
    "  " + _with() + "  ",
    _with(v=2, event="rx", n=KeyError, kind="entry", length=10, freq_khz=868300, rssi=-120),
    _with(event="append", n=KeyError, feed="0f" * 32, seq=4294967295, own=None),
]


@pytest.mark.parametrize("line,expected", BAD_LINES)
def test_python_validator_reasons(line, expected):
    rec, reasons = S.validate_line(line, S.Catalog())
    assert reasons == expected


@pytest.mark.parametrize("line", GOOD_LINES)
def test_python_validator_accepts(line):
    rec, reasons = S.validate_line(line, S.Catalog())
    assert reasons == [] and rec["id"] == "n:r:1"


def test_blank_lines_are_not_records():
    assert S.validate_line("", S.Catalog()) is None
    assert S.validate_line(" \t ", S.Catalog()) is None
