"""What a board (or anything on the bridge's control socket) sends is outside input: a
line nested 5,000 deep, a value that is not an object, a field of the wrong type or a line
longer than any event is refused or ignored on its own, and the next line still counts.
Before, a nested line raised RecursionError out of the event sink, the delivery recorder
and the control socket's request parser (a board can send ~1000 brackets in one 1 KB
event line), a seq too large for SQLite raised OverflowError out of the recorder, and a
port that was not text or a request argument of the wrong type raised TypeError or
AttributeError out of the control socket."""
import asyncio
import json
import os
import socket
import threading

import pytest

from tssb.bridge import control
from tssb.bridge.runner import EventSink
from tssb.chat import delivery
from tssb.context import Context

NESTED = '{"event": "rx", "x": ' + "[" * 5000 + "]" * 5000 + "}"
LONG = json.dumps({"event": "rx", "ts": 1, "pad": "x" * 20000})   # events are < 1 KiB


def test_the_event_sink_drops_any_line_that_is_not_one_event_object(tmp_path):
    p = tmp_path / "ev.jsonl"
    s = EventSink(str(p), clock=lambda: 1700000000000)
    for junk in (NESTED, "[1, 2]", '{"event": 5, "ts": 1}', '{"event": "rx", "ts": NaN}',
                 LONG, "[" * 1024):
        s(junk)
    s('{"v":1,"event":"rx","ts":true,"kind":"goset"}')     # a bool is no timestamp
    s('{"v":1,"event":"rx","ts":5,"kind":"goset"}')
    assert s.bad == 6 and s.written == 2
    lines = [json.loads(l) for l in p.read_text().splitlines()]
    assert [l["ts"] for l in lines] == [1700000000000, 1700000000000]


def test_the_delivery_recorder_ignores_any_other_board_line(tmp_path):
    ctx = Context.open(str(tmp_path / "a"))
    me = ctx.identity.public.hex()
    rec = delivery.Recorder(ctx.store, ctx.identity.public, clock=lambda: 1000)
    for junk in (NESTED, "[]", LONG,
                 json.dumps({"event": "append", "feed": me, "seq": 1 << 64}),
                 json.dumps({"event": "append", "feed": me, "seq": True}),
                 json.dumps({"event": "append", "feed": me, "seq": "3"}),
                 {"event": "append", "feed": me, "seq": -1}):
        rec.board_line(junk)
    assert delivery.holders(ctx.store, ctx.identity.public) == {}
    rec.board_line(json.dumps({"event": "append", "feed": me, "seq": 3}).encode())
    assert delivery.holders(ctx.store, ctx.identity.public) == {"board": (3, 1000)}
    ctx.close()


class _Link:
    port = "/dev/ttyUSB0"
    connected = False


def test_the_control_socket_refuses_bad_requests_in_one_line_and_its_client_bad_answers(
        tmp_path):
    srv = control.ControlServer(None, _Link())
    good = {"req": ["status"], "port": None, "timeout": 1}
    bad = ["[" * 5000 + "]" * 5000, "[1]", "5",
           json.dumps(dict(good, port=[1])), json.dumps(dict(good, timeout="nan")),
           json.dumps(dict(good, timeout=True)), json.dumps(dict(good, pad="x" * 9000)),
           json.dumps(dict(good, req=["cfg_get", 5])), json.dumps(dict(good, req="status")),
           '{"req": ["status"], "timeout": Infinity}']
    for line in bad:
        answer = asyncio.run(srv.answer(line.encode()))
        assert answer.keys() == {"fail", "port"} and answer["fail"].startswith("bad request")
        assert "\n" not in answer["fail"] and len(answer["fail"]) < 300, answer
    assert asyncio.run(srv.answer(json.dumps(good).encode()))["fail"].startswith(
        "the bridge has no board connected")
    # the client side: a nested answer is no answer
    home = str(tmp_path)
    path = control.socket_path(home)
    lst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lst.bind(path)
    lst.listen(1)

    def serve():
        c, _ = lst.accept()
        c.recv(control.MAX_LINE)
        c.sendall(b"[" * 5000 + b"\n")
        c.close()
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        with pytest.raises(OSError, match="gave no answer"):
            control.request(home, ["status"], timeout=1.0)
    finally:
        t.join(5)
        lst.close()
        os.unlink(path)
