"""Files and lines the CLI reads are outside input: nested 5,000 deep, not an object, of
the wrong type or over-long, each is refused or skipped in one line, never an internal
error. Before, `tssb config import` of a nested file and `tssb config set` of a nested
VALUE ended in "internal error: RecursionError", and `tssb logs` printed whatever the log
held (`--event` crashed on a nested line)."""
import json
import os

from conftest import tssb
from tssb.context import EVENT_FILE, Context

NESTED = "[" * 5000 + "]" * 5000


def _one_line_usage(r):
    assert r.code == 2, r
    assert "internal error" not in r.err and len(r.err.strip().splitlines()) == 1, r


def test_config_import_and_set_refuse_odd_json_in_one_line(tmp_path):
    export = {"format": "tssb-board-config", "settings": {"name": "n1"}}
    cases = {"nested.json": '{"format": "tssb-board-config", "settings": %s}' % NESTED,
             "list.json": "[1, 2]",
             "type.json": json.dumps(dict(export, settings={"power": "high"})),
             "nan.json": json.dumps(dict(export, settings={"power": float("nan")})),
             "long.json": json.dumps(dict(export, pad="x" * 70000))}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        _one_line_usage(tssb("config", "import", str(tmp_path / name)))
    for value in (NESTED, "NaN", "[1]"):
        _one_line_usage(tssb("config", "set", "power", value))


def test_logs_skips_lines_that_are_not_event_objects_with_a_note(tmp_path):
    home = str(tmp_path / "h")
    Context.open(home).close()
    path = os.path.join(home, EVENT_FILE)
    good = [json.dumps({"v": 1, "event": e, "ts": i, "node": "n"})
            for i, e in enumerate(("rx", "tx", "rx"))]
    junk = ['{"event": "rx", "x": %s}' % NESTED, "[1, 2]", '{"event": 5}',
            json.dumps({"event": "rx", "pad": "x" * 20000}), "not json"]
    lines = [good[0]] + junk[:2] + [good[1]] + junk[2:] + [b'{"event": "rx", "x": "\xff"}',
                                                           good[2]]
    with open(path, "wb") as f:
        f.write(b"".join((l if isinstance(l, bytes) else l.encode()) + b"\n" for l in lines))
    for argv, want in ((["-n", "0"], good), (["--event", "rx", "-n", "0"], [good[0], good[2]]),
                       (["-n", "2"], good[1:])):
        r = tssb("logs", "--home", home, *argv)
        assert r.code == 0 and r.out.splitlines() == want, r
        assert len(r.err.strip().splitlines()) == 1 and "skipped 6 lines" in r.err, r
    r = tssb("logs", "--home", home, "--follow", "--duration", "0.1", "--event", "tx")
    assert r.code == 0 and r.out.splitlines() == [good[1]] and "skipped 6" in r.err, r
