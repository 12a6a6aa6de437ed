"""`tssb dag post/show/sync` end to end: two data directories, a real session server on
loopback, the "trdag" stream dispatched to tssb.trdag.service."""
import asyncio
import json
import os
import threading
import time

import pytest

from tssb import cli
from tssb.context import EVENT_FILE, Context
from tssb.session import PeerPolicy, start_server
from tssb.trdag.service import open_index


def tssb(capsys, *argv):
    with pytest.raises(SystemExit) as e:
        cli.main(["--init"] + list(argv))
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def server_done(home, n, limit_s=20.0):
    """The server's sync_done events once it has logged n of them: the client's command
    returns when its own side is done, the server may still be storing the last data."""
    path = os.path.join(home, EVENT_FILE)
    end = time.monotonic() + limit_s
    while True:
        done = []
        if os.path.exists(path):
            with open(path) as f:
                done = [e for e in map(json.loads, f) if e["event"] == "sync_done"]
        if len(done) >= n or time.monotonic() > end:
            return done
        time.sleep(0.02)


def test_post_show_sync(tmp_path, capsys):
    ha, hb = str(tmp_path / "a"), str(tmp_path / "b")
    code, out, _ = tssb(capsys, "dag", "post", "--home", ha, "the root")
    assert code == 0 and "(new root)" in out
    root = out.split()[0]
    for i in range(5):
        assert tssb(capsys, "dag", "post", "--home", ha, "--root", root, "a%d" % i)[0] == 0
    code, out, _ = tssb(capsys, "dag", "show", "--home", ha, root)
    assert code == 0 and "5 messages, max depth 5, 1 tips" in out
    code, _, err = tssb(capsys, "dag", "post", "--home", ha, "--root", "00" * 20, "x")
    assert code == 1 and "no DAG with root" in err
    assert tssb(capsys, "dag", "show", "--home", ha, "nothex")[0] == 2

    ca, cb = Context.open(ha), Context.open(hb)
    cb.set_network_key(ca.network_key)
    loop = asyncio.new_event_loop()
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    try:
        server = asyncio.run_coroutine_threadsafe(start_server(
            cb, "127.0.0.1", 0, policy=PeerPolicy(cb.network_key, open_mode=True)), loop).result(10)
        ca.store.add_peer(cb.identity.public, addr="127.0.0.1:%d" % server.port)
        code, out, err = tssb(capsys, "dag", "sync", "--home", ha, "--peer",
                              "127.0.0.1:%d" % server.port, "--root", root, "--variant", "basic")
        assert code == 0, err
        assert "ok" in out and "sent" in out
        assert len(server_done(hb, 1)) == 1
        # b now holds the whole DAG and can extend it; a syncs the new message back
        assert tssb(capsys, "dag", "post", "--home", hb, "--root", root, "from b")[0] == 0
        code, out, err = tssb(capsys, "dag", "sync", "--home", ha, "--peer",
                              "127.0.0.1:%d" % server.port, "--root", root)
        assert code == 0, err
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(10)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        t.join(10)
    ia, ib = open_index(ca), open_index(cb)
    rid = bytes.fromhex(root)
    assert sorted(ia.members(rid)) == sorted(ib.members(rid)) and len(ia.members(rid)) == 6
    # a's own feed continued in order in a's store; b's store got a's feed too
    assert ca.store.front(ca.identity.public)[0] == 6
    assert cb.store.front(ca.identity.public)[0] == 6
    done = server_done(hb, 2)
    assert len(done) == 2 and all(e["ok"] and e["proto"] == "trdag" for e in done), \
        [(e["ok"], e.get("reason")) for e in done]
    assert done[0]["elements_sent"] == 0 and done[0]["elements_recv"] == 6
