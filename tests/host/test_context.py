"""Context's event log clock: wall clock by default, or the one the caller passes."""
import json
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
