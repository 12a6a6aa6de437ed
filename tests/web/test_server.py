"""The HTTP/WebSocket side of `tssb web` on loopback, without a browser: the access token,
Host and Origin checks, CSRF, input validation, and bounded buffers for slow browsers."""
import asyncio
import json

import aiohttp
import pytest
from tssb import posts
from tssb.context import Context
from tssb.web import hub as hubmod
from tssb.web import server
from tssb.web.view import WebView


def _run(home, body, token=None, **kw):
    async def main():
        ctx = Context.open(str(home))
        view = WebView(ctx, "127.0.0.1", 0, token, say=lambda s: None, **kw)
        await view.start()
        base = "http://127.0.0.1:%d" % view.runner.addresses[0][1]
        try:
            # unsafe: keep cookies of an IP address, as browsers do
            async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as s:
                return await body(view, s, base)
        finally:
            await view.close()
            ctx.close()
    return asyncio.run(main())


async def _csrf(s, base):
    async with s.get(base + "/api/state") as r:
        assert r.status == 200
        return (await r.json())["csrf"]


def test_page_assets_and_security_headers(tmp_path):
    async def body(view, s, base):
        async with s.get(base + "/") as r:
            assert r.status == 200 and r.content_type == "text/html"
            html = await r.text()
            assert "script-src 'self'" in r.headers["Content-Security-Policy"]
            assert r.headers["X-Content-Type-Options"] == "nosniff"
        # every asset the page names is served from here (no CDN)
        assert "http" not in html.replace('"http-equiv', "")
        for path in ("/static/app.js", "/static/app.css"):
            async with s.get(base + path) as r:
                assert r.status == 200 and len(await r.read()) > 1000
        async with s.get(base + "/static/../server.py") as r:
            assert r.status == 404
        async with s.get(base + "/static/server.py") as r:
            assert r.status == 404
    _run(tmp_path, body)


def test_loopback_refuses_foreign_host_names(tmp_path):
    # a DNS-rebinding page reaches 127.0.0.1 under its own name: refused
    async def body(view, s, base):
        async with s.get(base + "/api/state", headers={"Host": "evil.example"}) as r:
            assert r.status == 421
        port = base.rsplit(":", 1)[1]
        async with s.get(base + "/api/state", headers={"Host": "localhost:" + port}) as r:
            assert r.status == 200
    _run(tmp_path, body)


def test_token_required_and_kept_in_a_cookie(tmp_path):
    async def body(view, s, base):
        async with s.get(base + "/api/state") as r:
            assert r.status == 401
        async with s.get(base + "/?token=wrong") as r:
            assert r.status == 401
        async with s.get(base + "/?token=sekrit", allow_redirects=False) as r:
            assert r.status == 302 and r.headers["Location"] == "/"
            c = r.headers["Set-Cookie"]
            assert "HttpOnly" in c and "SameSite=Strict" in c
        async with s.get(base + "/api/state") as r:      # the cookie now
            assert r.status == 200
    _run(tmp_path, body, token="sekrit")


def test_beyond_loopback_needs_a_token():
    with pytest.raises(ValueError):
        server.Guard("0.0.0.0")
    assert not server.Guard("192.0.2.7", token="t").loopback
    assert server.Guard("::1").loopback and server.Guard("localhost").loopback


def test_post_needs_same_origin_and_csrf_token(tmp_path):
    async def body(view, s, base):
        csrf = await _csrf(s, base)
        good = {"Origin": base, server.CSRF_HEADER: csrf}
        url = base + "/api/post"
        for headers in ({}, {"Origin": "http://evil.example", server.CSRF_HEADER: csrf},
                        {"Origin": base}, {"Origin": base, server.CSRF_HEADER: "x" + csrf}):
            async with s.post(url, json={"text": "forged"}, headers=headers) as r:
                assert r.status == 403, headers
        # a form post from another site (no JSON, no header) is refused too
        async with s.post(url, data={"text": "forged"}, headers={"Origin": base}) as r:
            assert r.status == 403
        assert view.ctx.store.front(view.ctx.identity.public)[0] == 0
        async with s.post(url, json={"text": "<b>hi</b> \u00e9"}, headers=good) as r:
            assert r.status == 200
            got = await r.json()
        assert got == {"fid": view.own_fid(), "seq": 1}
        p = posts.read(view.ctx.store, view.ctx.identity.public, 1)
        assert p.text == "<b>hi</b> \u00e9"
    _run(tmp_path, body)


def test_post_input_validation(tmp_path):
    async def body(view, s, base):
        h = {"Origin": base, server.CSRF_HEADER: await _csrf(s, base)}
        url = base + "/api/post"
        cases = [
            (dict(data="text=x", headers=dict(h, **{"Content-Type": "text/plain"})), 415),
            (dict(data="{not json", headers=dict(h, **{"Content-Type": "application/json"})), 400),
            (dict(json=["text"], headers=h), 400),
            (dict(json={"text": 5}, headers=h), 400),
            (dict(json={"text": "   "}, headers=h), 400),
            (dict(data='{"text": "\\ud800"}', headers=dict(h, **{"Content-Type": "application/json"})), 400),
            (dict(json={"text": "x" * (server.MAX_POST_BYTES + 1)}, headers=h), 413),
            (dict(json={"text": "x" * (server.MAX_BODY + 10)}, headers=h), 413),
        ]
        for kw, status in cases:
            async with s.post(url, **kw) as r:
                assert r.status == status, (kw.get("json") or kw.get("data"))[:40]
                assert "error" in await r.json()
        assert view.ctx.store.front(view.ctx.identity.public)[0] == 0
        async with s.post(url, json={"text": "x" * server.MAX_POST_BYTES}, headers=h) as r:
            assert r.status == 200
    _run(tmp_path, body)


def test_posts_api_pages_and_bad_queries(tmp_path):
    async def body(view, s, base):
        for i in range(1, 8):
            view.post(b"post %d" % i)
        fid = view.own_fid()
        async with s.get(base + "/api/posts", params={"feed": fid, "limit": "3"}) as r:
            page = await r.json()
        assert [p["seq"] for p in page["posts"]] == [7, 6, 5]
        async with s.get(base + "/api/posts", params={"feed": fid, "before": "5"}) as r:
            assert [p["seq"] for p in (await r.json())["posts"]] == [4, 3, 2, 1]
        for q, status in (({"feed": "zz"}, 400), ({"feed": fid[:10]}, 400),
                          ({"feed": "00" * 32}, 404), ({"feed": fid, "limit": "0"}, 400),
                          ({"feed": fid, "limit": "1000"}, 400),
                          ({"feed": fid, "before": "-1"}, 400),
                          ({"feed": fid, "before": "x"}, 400)):
            async with s.get(base + "/api/posts", params=q) as r:
                assert r.status == status, q
    _run(tmp_path, body)


def test_websocket_refuses_other_origins_and_too_many_browsers(tmp_path):
    async def body(view, s, base):
        with pytest.raises(aiohttp.WSServerHandshakeError) as e:
            await s.ws_connect(base + "/ws", headers={"Origin": "http://evil.example"})
        assert e.value.status == 403
        view.hub.max_clients = 2
        a = await s.ws_connect(base + "/ws", headers={"Origin": base})
        b = await s.ws_connect(base + "/ws", headers={"Origin": base})
        first = json.loads((await a.receive()).data)
        assert first["t"] == "state" and first["csrf"] and first["me"]["fid"] == view.own_fid()
        with pytest.raises(aiohttp.WSServerHandshakeError) as e:
            await s.ws_connect(base + "/ws", headers={"Origin": base})
        assert e.value.status == 503
        await a.close()
        await b.close()
    _run(tmp_path, body)


def test_a_stalled_browser_is_bounded_and_a_slow_one_learns_its_gap(tmp_path):
    async def body(view, s, base):
        stalled = await s.ws_connect(base + "/ws", headers={"Origin": base})
        slow = await s.ws_connect(base + "/ws", headers={"Origin": base})
        await asyncio.sleep(0.2)
        row = {"ts": 1, "dir": "rx", "src": "air", "kind": "pkt120", "len": 120,
               "outcome": "dropped", "reason": "unknown_dmx", "id": "ab" * 8, "pad": "x" * 200}
        n = 20000         # ~6 MB of rows: far beyond the socket buffers and the queues
        for i in range(n):
            view.hub.packet(dict(row, seq=i))
            if i % 500 == 0:
                await asyncio.sleep(0)
        clients = list(view.hub.clients)
        assert len(clients) == 2
        for c in clients:
            assert c.queue.qsize() <= hubmod.CLIENT_QUEUE and c.bytes <= hubmod.CLIENT_BYTES
            assert c.skipped_total > n // 2
        assert len(view.hub.traffic) == hubmod.TRAFFIC_KEEP
        # the slow one reads now: it gets what was queued, then (when it has caught up
        # and something new comes) a gap notice and the new row
        gap = 0
        seqs = []
        marked = False
        while not seqs or seqs[-1] != -1:
            try:
                m = json.loads((await slow.receive(timeout=0.5)).data)
            except asyncio.TimeoutError:
                assert not marked, "the new row never came"
                view.hub.packet(dict(row, seq=-1))
                marked = True
                continue
            if m["t"] == "gap":
                gap += m["skipped"]     # one notice per run of skipped messages
            elif m["t"] == "pkt":
                seqs.append(m["row"]["seq"])
        # nothing lost silently: every row was either delivered or counted as skipped
        assert gap > n // 2 and len(seqs) + gap >= n + 1
        assert len(seqs) < n // 2 and seqs == sorted(seqs[:-1]) + [-1]
        await stalled.close()
        await slow.close()
    _run(tmp_path, body)


def test_alone_the_event_log_of_another_bridge_is_live(tmp_path):
    # `tssb web` alone on a home where a `tssb bridge` in another process logs its board
    from tssb.context import EventLog
    from tssb.web.rig import author_feed

    async def body(view, s, base):
        ws = await s.ws_connect(base + "/ws", headers={"Origin": base})
        first = json.loads((await ws.receive(timeout=5)).data)
        assert first["mode"] == "alone" and first["board"]["plan"]["budget_ms"] == 36000
        fa = author_feed(view.ctx.store, b"\x05" * 32, [b"from the other bridge"])
        board = EventLog(view.ctx.events.path, "board7")
        board.emit("rx", kind="pkt120", length=124, dmx=view.ctx.store.entry(fa, 1)[:7],
                   rssi=-77.0, snr=8.5, airtime_ms=71.9)
        board.emit("tx", kind="goset", length=109, airtime_ms=184.6)
        board.emit("drop", reason="bad_crc", length=33)
        EventLog(view.ctx.events.path, "host-other").emit(
            "sync_done", proto="clock", peer="cd" * 32, ok=False, reason="timeout")
        got = {}
        while not {"pkt", "sync", "feeds"} <= set(got) or len(got.get("pkt", [])) < 2:
            m = json.loads((await ws.receive(timeout=5)).data)
            got.setdefault(m["t"], []).append(m)
        rx, drop = [m["row"] for m in got["pkt"]][:2]
        assert (rx["kind"], rx["feed"], rx["seq"], rx["rssi"], rx["via"]) == (
            "entry", fa.hex(), 1, -77.0, "board7")
        assert (drop["outcome"], drop["reason"]) == ("dropped", "bad_crc")
        sync = got["sync"][0]["sync"]
        assert (sync["proto"], sync["ok"], sync["reason"]) == ("clock", False, "timeout")
        assert any(f["fid"] == fa.hex() for m in got["feeds"] for f in m["feeds"])
        st = view.state()
        assert st["airtime"]["used_ms"] == 184.6 and st["airtime"]["frames"] == 1
        await ws.close()
    _run(tmp_path, body, plan="EU868.a")


def test_with_the_bridge_the_logs_past_counts_once(tmp_path):
    # lines from before the view started (an earlier bridge run) fill the airtime and
    # traffic history; later board lines reach the view live from the port, not twice
    from tssb.bridge.hostnode import HostNode
    from tssb.context import EventLog

    async def main():
        ctx = Context.open(str(tmp_path))
        board = EventLog(ctx.events.path, "board7")
        board.emit("tx", kind="goset", length=109, airtime_ms=100.0)
        board.emit("drop", reason="radio_crc", length=50)
        view = WebView(ctx, "127.0.0.1", 0, say=lambda s: None)
        await view.start(HostNode(ctx.store, ctx.identity, ctx.events))
        try:
            board.emit("tx", kind="goset", length=109, airtime_ms=50.0)
            view.follower.poll()
            st = view.state()
            assert st["mode"] == "bridge"
            assert (st["airtime"]["used_ms"], st["airtime"]["frames"]) == (100.0, 1)
            assert [r["reason"] for r in st["traffic"]] == ["radio_crc"]
        finally:
            await view.close()
            ctx.close()
    asyncio.run(main())


def test_chats_dm_and_ticks(tmp_path):
    """A DM from the page is the app's box; the chats list it; another host's reply shows
    in the chat and is read (ACK); our post carries the stages seen and the receipts."""
    from tssb import ownfeed
    from tssb.chat import appmsg, inbox
    from tssb.chat.delivery import Recorder
    other = Context.open(str(tmp_path / "other"))
    fo = other.identity.public

    async def body(view, s, base):
        me = view.ctx.identity.public
        h = {"Origin": base, server.CSRF_HEADER: await _csrf(s, base)}
        for bad in ({"text": "x", "to": []}, {"text": "x", "to": ["zz"]},
                    {"text": "x", "to": [fo.hex()] * 8}, {"text": "x"}):
            async with s.post(base + "/api/dm", json=bad, headers=h) as r:
                assert r.status == 400, bad
        async with s.post(base + "/api/dm", json={"text": "hi other", "to": [fo.hex()]},
                          headers=h) as r:
            assert r.status == 200
            got = await r.json()
        key = inbox.chat_key([me, fo])
        assert got == {"fid": me.hex(), "seq": 1, "chat": key, "unheard": []}
        # the other host opens it, replies, and its DLV arrives here
        mid = view.ctx.store.mid(me, 1)
        content, _ = appmsg.private_tav(fo, [me], "hi back")
        ownfeed.post(other, content)
        ib = inbox.Inbox(other.store, other.identity)
        ib.send_receipt(appmsg.DLV, me, mid, lambda c: ownfeed.post(other, c))
        st, dst = other.store, view.ctx.store
        dst.add_feed(fo)
        for q in range(1, st.front(fo)[0] + 1):
            dst.append(fo, q, st.entry(fo, q), st.mid(fo, q))
            for c in range(st.chunk_count(fo, q)):
                dst.put_chunk(fo, q, c, st.chunk(fo, q, c))
        Recorder(dst, me).saw("air", 1)        # a neighbour's WANT asked for seq 2
        async with s.get(base + "/api/chats") as r:
            chats = (await r.json())["chats"]
        assert [c["key"] for c in chats] == ["public", key] and chats[1]["posts"] == 2
        async with s.get(base + "/api/chat?key=" + key) as r:
            posts_ = (await r.json())["posts"]
        assert sorted(p["text"] for p in posts_) == ["hi back", "hi other"]   # same second
        (ours,) = [p for p in posts_ if p["fid"] == me.hex()]
        assert ours["stages"]["fetched"] == "air" and ours["stages"]["stored"] is True
        assert ours["stages"]["delivered"] == [fo.hex()[:8]] and "read" not in ours["stages"]
        # loading it sends nothing; the page then says it showed it: an ACK boxed to
        # [us, other], once, and never from another site
        assert dst.front(me)[0] == 1
        for headers in ({}, {"Origin": "http://evil.example", server.CSRF_HEADER: h[
                server.CSRF_HEADER]}):
            async with s.post(base + "/api/read", json={"key": key}, headers=headers) as r:
                assert r.status == 403
        for n in (1, 0):
            async with s.post(base + "/api/read", json={"key": key, "limit": 5},
                              headers=h) as r:
                assert r.status == 200 and (await r.json())["receipts"] == n
        ack = posts.read(dst, me, dst.front(me)[0], view.inbox.keys)
        assert (ack.tag, ack.private) == ("ACK", "open")
        async with s.get(base + "/api/chat?key=" + "ab" * 32) as r:
            assert r.status == 404
        async with s.get(base + "/api/chat?key=junk") as r:
            assert r.status == 400
        # a group with a member we hold nothing of: sent, with a warning naming it
        from tinyssb import crypto
        new = crypto.publickey(b"\x05" * 32)
        async with s.post(base + "/api/dm", json={"text": "hi both", "to": [fo.hex(),
                                                                            new.hex()]},
                          headers=h) as r:
            assert r.status == 200
            got = await r.json()
        assert got["unheard"] == [new.hex()] and new.hex()[:8] in got["warning"]
        assert posts.read(dst, me, got["seq"], view.inbox.keys).private == "open"
    try:
        _run(tmp_path / "me", body)
    finally:
        other.close()
