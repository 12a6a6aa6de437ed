"""Depth and type abuse against the web view's parsers (issue 34 item 6): an event-log line
nested 5,000 deep killed the running view's log task and made a fresh `tssb web` fail with
"internal error: RecursionError"; the same through POST /api/post gave a 500 without the
security headers. Now each is one refusal and everything goes on."""
import asyncio
import json

from tssb.context import EventLog
from tssb.web import eventlog as evmod
from tssb.web import server

from test_server import _csrf, _run

DEEP = "[" * 5000 + "]" * 5000                       # 10 KB, nested 5,000 deep
DEEP_EVENT = '{"event": "sync_done", "x": %s}' % ("[" * 5000 + "]" * 5000)


def test_follower_survives_any_line(tmp_path):
    path = str(tmp_path / "events.jsonl")
    got = []

    def on_event(rec):
        if rec["event"] == "boom":
            raise RuntimeError("a bug in a consumer")      # not a type error of a field
        got.append(rec["event"])
    f = evmod.Follower(path, on_event)
    lines = [DEEP, DEEP_EVENT, '{"event": "a", "ts": NaN}', '{"event": "b", "n": 1e999}',
             '{"event": "boom"}', '{"event": "c"}']
    with open(path, "w") as out:
        out.write("\n".join(lines) + "\n")
    f.poll()
    assert got == ["c"] and f.bad == 5
    with open(path, "a") as out:
        out.write(json.dumps({"event": "d"}) + "\n")
    f.poll()
    assert got == ["c", "d"]


def test_a_nested_log_line_stops_neither_a_running_nor_a_fresh_web_view(tmp_path):
    home = tmp_path / "h"

    async def body(view, s, base):
        ws = await s.ws_connect(base + "/ws", headers={"Origin": base})
        await ws.receive(timeout=5)                      # the state
        with open(view.ctx.events.path, "a") as out:
            out.write(DEEP + "\n" + DEEP_EVENT + "\n")
        await asyncio.sleep(2 * evmod.POLL_S)
        EventLog(view.ctx.events.path, "other").emit(
            "sync_done", proto="setu", peer="ab" * 32, ok=True, reason=None)
        while True:                                     # the log task is still alive
            m = json.loads((await ws.receive(timeout=5)).data)
            if m["t"] == "sync":
                assert m["sync"]["proto"] == "setu"
                break
        await ws.close()
        return view.follower.bad
    assert _run(home, body) == 2
    # a fresh view starts with that line in its backlog
    assert _run(home, lambda view, s, base: asyncio.sleep(0, view.follower.bad)) == 2


def test_post_of_nested_or_odd_json_is_a_400_with_the_headers(tmp_path):
    async def body(view, s, base):
        h = {"Origin": base, server.CSRF_HEADER: await _csrf(s, base),
             "Content-Type": "application/json"}
        for data in ('{"text": %s}' % DEEP[:server.MAX_BODY - 20],
                     '{"text": "x", "more": [[[[[[1]]]]]]}',
                     '{"text": NaN}', '{"text": "x", "n": 1e999}', b'{"text": "\xff"}'):
            async with s.post(base + "/api/post", data=data, headers=h) as r:
                assert r.status == 400, data[:40]
                assert "error" in await r.json()
                assert r.headers["Content-Security-Policy"] == server.CSP
                assert r.headers["X-Frame-Options"] == "DENY"
        assert view.ctx.store.front(view.ctx.identity.public)[0] == 0
    _run(tmp_path, body)


def test_an_internal_error_still_carries_the_security_headers(tmp_path, monkeypatch):
    async def body(view, s, base):
        def broken():
            raise RuntimeError("a bug")
        monkeypatch.setattr(view, "state", broken)
        async with s.get(base + "/api/state") as r:
            assert r.status == 500 and (await r.json())["error"] == "internal error"
            assert r.headers["Content-Security-Policy"] == server.CSP
    _run(tmp_path, body)
