"""Context's event log clock: wall clock by default, or the one the caller passes."""
import json
import os
import time

from tssb.context import Context


def _ts(ctx):
    return [json.loads(x)["ts"] for x in open(ctx.events.path)]


def test_event_log_clock_hook(tmp_path):
    ticks = iter([1735689600000, 1735689600250])
    ctx = Context.open(str(tmp_path / "a"), clock=lambda: next(ticks))
    try:
        ctx.events.emit("want", n=1)
        ctx.events.emit("want", n=2)
        assert _ts(ctx) == [1735689600000, 1735689600250]
    finally:
        ctx.close()


def test_event_log_defaults_to_wall_clock(tmp_path):
    ctx = Context.open(str(tmp_path / "b"))
    try:
        before = int(time.time() * 1000)
        ctx.events.emit("want", n=1)
        after = int(time.time() * 1000)
        assert before <= _ts(ctx)[0] <= after
    finally:
        ctx.close()


def test_event_log_rotates_by_size_and_age_and_closes_by_rename(tmp_path):
    from tssb.context import EventLog
    path = str(tmp_path / "logs" / "events.jsonl.live")
    log = EventLog(path, "h", rotate_bytes=400)
    for i in range(10):
        log.emit("want", n=i)
    closed = log.files()[:-1]
    assert closed and all(p.endswith(".jsonl") and "/events-" in p for p in closed)
    assert log.files()[-1] == path
    lines = [json.loads(l) for p in log.files() for l in open(p)]
    assert [r["n"] for r in lines] == list(range(10))        # every line once, in order
    assert all(os.path.getsize(p) <= 400 + 200 for p in closed)
    # A live file left idle longer than rotate_s is closed when the log is opened again.
    old = time.time() - 7200
    os.utime(path, (old, old))
    again = EventLog(path, "h")
    assert not os.path.exists(path) and len(again.files()) == len(closed) + 1
    # A home written before rotation existed: its growing file becomes a closed one.
    with open(str(tmp_path / "logs" / "events.jsonl"), "w") as f:
        f.write(json.dumps(lines[0]) + "\n")
    EventLog(path, "h")
    assert not os.path.exists(str(tmp_path / "logs" / "events.jsonl"))


def test_event_log_writers_in_two_processes_lose_no_line(tmp_path):
    import subprocess
    import sys
    path = str(tmp_path / "logs" / "events.jsonl.live")
    code = ("import sys; sys.path[:0] = %r; from tssb.context import EventLog\n"
            "log = EventLog(%r, sys.argv[1], rotate_bytes=2000)\n"
            "for i in range(300): log.emit('want', n=i)\n" % (sys.path, path))
    procs = [subprocess.Popen([sys.executable, "-c", code, name]) for name in ("p1", "p2")]
    assert [p.wait(60) for p in procs] == [0, 0]
    from tssb.context import EventLog
    recs = [json.loads(l) for p in EventLog(path, "x").files() for l in open(p)]
    assert len(recs) == 600 and len({r["id"] for r in recs}) == 600
