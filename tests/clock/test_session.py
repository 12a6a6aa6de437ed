"""`tssb clock sync` end to end: two data directories, a real session server on loopback
(`tssb.session.start_server`, the "clock" stream dispatched to tssb.clock.service), the
client through the CLI. Feeds, threads and single-feed modes; a forked feed gets proofs
and joins on both sides; refused clients fail with a clear status and never hang."""
import asyncio
import json
import os
import threading
import time

import pytest

from clock_helpers import Feed, put
from tssb import cli
from tssb.clock import events as E
from tssb.clock import forks
from tssb.clock.repo import FeedRepo, ThreadRepo
from tssb.clock.sync import SyncMachine
from tssb.context import Context
from tssb.session import start_server


def tssb(capsys, *argv):
    with pytest.raises(SystemExit) as e:
        cli.main(["--init"] + list(argv))
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


class Server:
    """Host A serving on loopback from an event loop in a background thread."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.srv = self._run(start_server(ctx, "127.0.0.1", 0))
        self.addr = "127.0.0.1:%d" % self.srv.port

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def close(self):
        try:
            self._run(self.srv.close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


@pytest.fixture
def hosts(tmp_path):
    """(a, b, server, home_b): b may talk to a (same network key, each in the other's list)."""
    a = Context.open(str(tmp_path / "a"))
    b = Context.open(str(tmp_path / "b"))
    b.set_network_key(a.network_key)
    a.store.add_peer(b.identity.public, name="b")
    server = Server(a)
    b.store.add_peer(a.identity.public, name="a", addr=server.addr)
    yield a, b, server, str(tmp_path / "b")
    server.close()
    a.close()
    b.close()


def feed_repo(ctx):
    return FeedRepo(ctx.store, ctx.store.db, 128, 4)


def digest(ctx, fids):
    m = SyncMachine(feed_repo(ctx), "feeds")
    m._set_scope(fids)
    return m.digest()


def sync_events(ctx, wait=0):
    """`sync_done` events of a host. The server writes its own after the client may have
    returned, so `wait` > 0 polls (bounded) until that many are there."""
    deadline = time.monotonic() + 20
    while True:
        done = []
        if os.path.exists(ctx.events.path):
            with open(ctx.events.path) as f:
                done = [e for e in map(json.loads, f) if e["event"] == "sync_done"]
        if len(done) >= wait or time.monotonic() > deadline:
            return done
        time.sleep(0.01)


def test_feeds_mode_with_gaps_on_both_sides_and_a_fork(hosts, capsys):
    a, b, server, home_b = hosts
    feeds = [Feed("s%d" % i).extend(10) for i in range(4)]
    for i, f in enumerate(feeds):            # each side lacks the tail the other holds
        put(a.store, f.raws[:10 - 2 * i])
        put(b.store, f.raws[:4 + 2 * i])
    only_a = Feed("only-a").extend(3)
    put(a.store, only_a.raws)
    forked = Feed("forked").extend(6)
    mids = [E.parse_feed_event(r).eid for r in forked.raws]
    other, _ = forked.entry(3, mids[1], b"the other branch")
    put(a.store, forked.raws)                # A: main branch; B: the other one
    put(b.store, forked.raws[:2])
    feed_repo(b).save(E.parse_feed_event(other))
    common = [f.fid for f in feeds] + [forked.fid]
    assert digest(a, common) != digest(b, common)

    code, out, err = tssb(capsys, "clock", "sync", "--peer", server.addr, "--home", home_b)
    assert code == 0, err
    assert "ok=True" in out and "joins: 1 made, 1 sent, 1 received" in out
    assert digest(a, common) == digest(b, common)
    want = [max(10 - 2 * i, 4 + 2 * i) for i in range(4)]     # [10, 8, 8, 10]: union
    assert [b.store.front(f.fid)[0] for f in feeds] == want
    assert [a.store.front(f.fid)[0] for f in feeds] == want
    assert not b.store.has_feed(only_a.fid)  # feeds mode syncs the common feeds only
    for me, peer in ((a, b), (b, a)):
        repo = feed_repo(me)
        assert [(fid, seq) for fid, seq, _ in repo.forks()] == [(forked.fid, 3)]
        got = {row[1]: forks.parse_join(row[5]) for row in repo.joins(forked.fid)}
        assert sorted(got) == sorted([me.identity.public, peer.identity.public])
        assert all(forks.check_join(j, repo.load(forked.fid)) for j in got.values())
        done, = sync_events(me, wait=1)
        assert done["ok"] and done["proto"] == "clock" and done["mode"] == "feeds"
        assert done["peer"] == peer.identity.public.hex()

    code, out, err = tssb(capsys, "clock", "status", "--home", home_b)
    assert code == 0, err
    assert "forks: 1 proof(s)" in out and "joins: 2" in out and "FORKED" in out
    assert "(us)" in out and "(peer)" in out and out.count("agrees-with-us: yes") == 2


def test_threads_mode(hosts, capsys):
    a, b, server, home_b = hosts
    seeds = [bytes([i]) * 32 for i in (7, 8, 9)]
    root = E.make_signed_event(seeds[0], E.ZERO_ROOT, (), 1, b"topic")
    ta, tb = ThreadRepo(a.store.db, 128, 4), ThreadRepo(b.store.db, 128, 4)
    ta.post(root)
    tb.post(root)
    pa = pb = root.eid
    for i in range(4):
        ea = E.make_signed_event(seeds[1], root.eid, (pa,), 10 + i, b"a%d" % i)
        eb = E.make_signed_event(seeds[2], root.eid, (pb,), 10 + i, b"b%d" % i)
        ta.post(ea)
        tb.post(eb)
        pa, pb = ea.eid, eb.eid
    code, out, err = tssb(capsys, "clock", "sync", "--peer", server.addr, "--home", home_b,
                          "--mode", "threads")
    assert code == 0, err
    da, db = ta.load(root.eid), tb.load(root.eid)
    assert len(da) == len(db) == 9 and da.digest() == db.digest()
    assert sorted(da.tips()) == sorted([pa, pb])
    assert [e["mode"] for e in sync_events(b)] == ["threads"]


def test_entity_mode_fetches_one_feed(hosts, capsys):
    a, b, server, home_b = hosts
    wanted, other = Feed("wanted").extend(7), Feed("other").extend(2)
    put(a.store, wanted.raws)
    put(a.store, other.raws)
    code, out, err = tssb(capsys, "clock", "sync", "--peer", server.addr, "--home", home_b,
                          "--feed", wanted.fid.hex())
    assert code == 0, err
    assert "clock sync (entity)" in err and "events sent=0 recv=7" in out
    assert b.store.front(wanted.fid)[0] == 7 and not b.store.has_feed(other.fid)
    assert digest(a, [wanted.fid]) == digest(b, [wanted.fid])
    assert [e["mode"] for e in sync_events(a, wait=1)] == ["entity"]


def test_unknown_client_is_refused(hosts, tmp_path, capsys):
    a, b, server, _ = hosts
    home_c = str(tmp_path / "c")
    c = Context.open(home_c)
    c.set_network_key(a.network_key)         # right network, but not in A's peers list
    c.store.add_peer(a.identity.public, addr=server.addr)
    c.close()
    code, out, err = tssb(capsys, "clock", "sync", "--peer", server.addr, "--home", home_c)
    assert code == 1 and "handshake refused" in err and "peers list" in err
    c = Context.open(home_c)
    done, = sync_events(c)
    c.close()
    assert not done["ok"] and done["reason"] == "handshake refused"
    assert done["peer"] == a.identity.public.hex()
    assert server.srv.failures.get("peer not allowed") == 1
    assert not sync_events(a)                # no session, no service ran


def test_bad_network_key_is_refused(hosts, tmp_path, capsys):
    a, b, server, home_b = hosts
    b.set_network_key(bytes(32))             # allowed peer, wrong network
    code, out, err = tssb(capsys, "clock", "sync", "--peer", server.addr, "--home", home_b)
    assert code == 1 and "handshake refused" in err
    assert sum(server.srv.failures.values()) == 1
    assert not server.srv.failures.get("peer not allowed")   # refused before that check
    assert not sync_events(a)


def test_usage_errors_are_clear(hosts, capsys):
    a, b, server, home_b = hosts
    cases = [(["--peer", "nohostport"], "HOST:PORT"),
             (["--peer", server.addr, "--feed", "zz"], "64 hex digits"),
             (["--peer", server.addr, "--feed", "ab" * 32, "--mode", "threads"],
              "cannot be combined"),
             (["--peer", server.addr, "--n", "0"], "out of range")]
    for argv, text in cases:
        code, _, err = tssb(capsys, "clock", "sync", "--home", home_b, *argv)
        assert code == 2 and text in err, (argv, err)
    # well-formed, but no peer known there: a failure (as `tssb sync` says it)
    code, _, err = tssb(capsys, "clock", "sync", "--home", home_b, "--peer", "127.0.0.1:1")
    assert code == 1 and "tssb peer add" in err, err
    assert not sync_events(b)


def test_help_explains(capsys):
    code, out, _ = tssb(capsys, "clock", "sync", "--help")
    assert code == 0
    for word in ("--peer", "--feed", "--mode", "--timeout", "peers list", "join", "Exit status"):
        assert word in out
    code, out, _ = tssb(capsys, "clock", "status", "--help")
    assert code == 0 and "joins" in out and "fork" in out


def test_status_of_an_empty_home(tmp_path, capsys):
    code, out, err = tssb(capsys, "clock", "status", "--home", str(tmp_path / "e"))
    assert code == 0, err
    assert "feeds: 0" in out and "forks: 0 proof(s)" in out and "joins: 0" in out
    assert not os.path.exists(str(tmp_path / "e" / "logs" / "events.jsonl.live"))


def test_store_db_needs_a_database():
    from tinyssb.store import MemStore
    from tssb.clock.errors import ClockError
    from tssb.clock.service import store_db
    with pytest.raises(ClockError) as ei:
        store_db(MemStore())
    assert ei.value.reason == "no_db"
