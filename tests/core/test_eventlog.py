# Event log writer. Plain test functions (no pytest import): this file also runs under
# MicroPython via tools/mptest.py.
import json

try:
    import io
except ImportError:  # pragma: no cover
    import uio as io

from tinyssb import eventlog


FEED = bytes(range(32))


def _log(node="n1", run="r1", now=1735689600123):
    lines = []
    t = [now]
    log = eventlog.EventLog(node, lines.append, lambda: t[0], run=run)
    return log, lines, t


def _raises(fn, *args, **kw):
    try:
        fn(*args, **kw)
    except ValueError:
        return True
    return False


def test_envelope_and_fields():
    log, lines, t = _log()
    eid = log.emit("tx", kind="entry", length=120, airtime_ms=71.9, dmx=b"\x01\x02\x03\x04\x05\x06\x07")
    assert len(lines) == 1
    rec = json.loads(lines[0])
    assert eid == "n1:r1:1"
    assert rec["id"] == eid
    assert rec["v"] == 1
    assert rec["ts"] == 1735689600123
    assert rec["node"] == "n1"
    assert rec["event"] == "tx"
    assert rec["length"] == 120
    assert rec["dmx"] == "01020304050607"
    assert "\n" not in lines[0]


def test_ids_count_up_and_clock_is_read_per_event():
    log, lines, t = _log()
    log.emit("want", n=3)
    t[0] += 250
    log.emit("want", n=4)
    a = json.loads(lines[0])
    b = json.loads(lines[1])
    assert a["id"] == "n1:r1:1" and b["id"] == "n1:r1:2"
    assert b["ts"] - a["ts"] == 250
    assert log.count == 2


def test_bytes_become_hex_and_none_is_omitted():
    log, lines, t = _log()
    log.emit("append", feed=FEED, seq=7, origin_ts=None)
    rec = json.loads(lines[0])
    assert rec["feed"] == "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
    assert "origin_ts" not in rec
    assert rec["seq"] == 7


def test_v2_field_raises_line_version():
    log, lines, t = _log()
    log.emit("rx", kind="goset", length=105, freq_khz=868300)
    log.emit("rx", kind="goset", length=105)
    assert json.loads(lines[0])["v"] == 2
    assert json.loads(lines[1])["v"] == 1


def test_unknown_event_field_and_missing_field_are_refused():
    log, lines, t = _log()
    assert _raises(log.emit, "nope", n=1)
    assert _raises(log.emit, "want", n=1, extra=2)
    assert _raises(log.emit, "want")
    assert _raises(log.emit, "want", n=None)
    assert lines == []
    assert log.count == 0


def test_bad_node_names_are_refused():
    ok = lambda s: None
    clock = lambda: 0
    for bad in ("", "a b", "x" * 65, "a/b", "a:b", None, 5):
        assert _raises(eventlog.EventLog, bad, ok, clock, "r")
    assert _raises(eventlog.EventLog, "n", ok, clock, "r:1")
    assert eventlog.valid_node("board-1.lab_A")


def test_default_run_ids_differ():
    a = eventlog.EventLog("n", lambda s: None, lambda: 0)
    b = eventlog.EventLog("n", lambda s: None, lambda: 0)
    assert a.run != b.run
    assert eventlog.valid_node(a.run)


def test_line_writer_terminates_lines():
    buf = io.StringIO()
    log = eventlog.EventLog("n", eventlog.line_writer(buf), lambda: 1735689600000, run="r")
    log.emit("goset", count=2, state=FEED)
    log.emit("duty_wait", wait_ms=10)
    text = buf.getvalue()
    assert text.endswith("\n")
    parts = text.split("\n")
    assert len(parts) == 3 and parts[2] == ""
    assert json.loads(parts[1])["wait_ms"] == 10


def test_packet_id_is_the_sha256_prefix():
    # SHA-256("abc") = ba7816bf8f01cfea 414140de...
    assert eventlog.packet_id(b"abc") == "ba7816bf8f01cfea"
    assert eventlog.packet_id(bytearray(b"abc")) == "ba7816bf8f01cfea"
    assert len(eventlog.packet_id(b"")) == 16
