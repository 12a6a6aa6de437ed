"""One home, many commands, seen from the bridge: a running `tssb bridge` sends on what
another process stored in its home (a `tssb post`), says when no board answers on its
port, and a second bridge on a port in use is refused."""
import contextlib
import io
import os
import pty
import signal
import subprocess
import sys
import time

from bridge_device import Device
from bridge_helpers import has_all
from tssb.context import Context, Identity
from tssb.store import Store

STARTUP_S = 30.0


def cli(*argv):
    """`tssb ARGV` in this process: (exit status, stdout, stderr)."""
    from tssb.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in argv])
            code = 0
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


def spawn(*argv):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "tssb"] + [str(a) for a in argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def wait_line(p, words, limit=STARTUP_S):
    """Read p's stderr until a line holds `words`; returns (line, seconds it took)."""
    t0 = time.monotonic()
    seen = []
    while time.monotonic() - t0 < limit:
        line = p.stderr.readline().decode()
        if not line:
            break
        seen.append(line)
        if words in line:
            return line, time.monotonic() - t0
    p.kill()
    raise AssertionError("never saw %r: %r" % (words, seen))


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def wait_for(cond, limit_s):
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


@contextlib.contextmanager
def bridged(home, fid):
    """`tssb bridge` on `home` in a process of its own, its port a board stand-in that
    follows feed `fid`; yields (the board, the bridge process) once it is connected."""
    dev = Device(Identity.generate())
    dev.link.node.follow(fid)
    dev.start()
    bridge = spawn("bridge", "--port", dev.port_name, "--home", home, "--duration", 60)
    try:
        wait_line(bridge, "connected")
        yield dev, bridge
    finally:
        stop(bridge)
        dev.stop()


def test_post_while_bridge_runs_reaches_the_board(tmp_path):
    """`tssb post` in one process while `tssb bridge` runs in another: the bridge notices
    the entry in the store and the board gets it (on main it never did: the bridge's node
    kept the feed's front it read at start)."""
    home = str(tmp_path / "h")
    assert cli("id", "--home", home)[0] == 0
    assert cli("post", "--home", home, "before the bridge")[0] == 0
    ctx = Context.open(home)
    host_fid = ctx.identity.public
    ctx.close()
    with bridged(home, host_fid) as (dev, _):
        assert wait_for(lambda: has_all(dev.store, host_fid, 1), 30), "bridge never served seq 1"
        code, out, err = cli("post", "--home", home, "while the bridge runs")
        assert code == 0 and "posted seq 2" in out, (out, err)
        assert wait_for(lambda: has_all(dev.store, host_fid, 2), 20), \
            "the board never got the entry posted beside the running bridge"


def _copy_feed(src_home, dst_home, fid):
    """What a sync in another process does: dst's store gets src's new entries of fid."""
    s, d = Context.open(src_home), Context.open(dst_home)
    try:
        d.store.add_feed(fid)
        for q in range(d.store.front(fid)[0] + 1, s.store.front(fid)[0] + 1):
            d.store.append(fid, q, s.store.entry(fid, q), s.store.mid(fid, q))
            for c in range(s.store.chunk_count(fid, q)):
                d.store.put_chunk(fid, q, c, s.store.chunk(fid, q, c))
    finally:
        s.close()
        d.close()


def _own_feed(home):
    """[((kind, tag), entry, chunks)] of the home's own feed, its posts opened with its key."""
    from tssb import posts
    from tssb.chat import box
    ctx = Context.open(home)
    try:
        me, keys, st = ctx.identity.public, box.Keys(ctx.identity.secret_key), ctx.store
        return [((p.kind, p.tag), bytes(st.entry(me, p.seq)), _chunks(st, me, p.seq))
                for p in (posts.read(st, me, q, keys) for q in range(1, st.front(me)[0] + 1))]
    finally:
        ctx.close()


def _chunks(store, fid, seq):
    return [bytes(store.chunk(fid, seq, c)) for c in range(store.chunk_count(fid, seq))]


def _kinds(home):
    return [k for k, _, _ in _own_feed(home)]


def test_dm_name_and_receipts_from_other_processes_while_the_bridge_posts(tmp_path):
    """While `tssb bridge` runs, other processes write to its home's own feed (`tssb dm`,
    `tssb name`, the read receipts of `tssb read`) and the bridge writes there itself (the
    delivered receipts it owes): every write is taken, the feed does not fork, and the
    board gets all of it, entry for entry."""
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    for home in (a, b):
        assert cli("id", "--home", home)[0] == 0
    assert cli("name", "Bea", "--home", b)[0] == 0
    ca, cb = Context.open(a), Context.open(b)
    fa, fb = ca.identity.public, cb.identity.public
    ca.close()
    cb.close()
    _copy_feed(b, a, fb)                  # A knows Bea (her IAM)
    with bridged(a, fa) as (dev, bridge):
        # Bea's message arrives (a sync in another process): the bridge owes it a DLV and
        # writes it within a round, while `tssb dm` and `tssb name` write beside it
        assert cli("dm", fa.hex(), "are you there?", "--home", b)[0] == 0
        _copy_feed(b, a, fb)
        for argv in (("dm", "Bea", "yes, here"), ("name", "Alice")):
            code, out, err = cli(*argv, "--home", a)
            assert code == 0, (argv, out, err)
        dlv = ("receipt", "DLV")
        assert wait_for(lambda: dlv in _kinds(a), 20), _kinds(a)
        # reading the chat in another process sends its ACK
        code, out, err = cli("read", "--chat", "Bea", "--home", a)
        assert code == 0 and "are you there?" in out, (out, err)
        # Bea's second message: the bridge's next DLV goes on top of all of that
        assert cli("dm", fa.hex(), "good", "--home", b)[0] == 0
        _copy_feed(b, a, fb)
        assert wait_for(lambda: _kinds(a).count(dlv) == 2, 20), _kinds(a)
        feed = _own_feed(a)
        assert sorted(k for k, _, _ in feed) == sorted([
            ("text", "TAV"), ("name", "IAM"), dlv, ("receipt", "ACK"), dlv]), feed
        # the board holds the same entries (no second entry for any seq) and every chunk
        assert wait_for(lambda: dev.store.has_feed(fa) and [
            (bytes(dev.store.entry(fa, q)), _chunks(dev.store, fa, q))
            for q in range(1, dev.store.front(fa)[0] + 1)] == [(e, c) for _, e, c in feed],
            30), "the board never got the whole feed"
    log = bridge.stderr.read().decode()
    # nothing refused: no write of the bridge failed ("chat upkeep: append out of order")
    assert not [l for l in log.splitlines() if " WARNING " in l or " ERROR " in l], log


def test_bridge_node_takes_up_what_another_connection_stored(tmp_path):
    """The host node of a bridge (tssb.bridge.hostnode) rereads a feed that another
    connection to its store extended: entries, side-chain chunks, and a race in which the
    other one stored the node's next entry first."""
    from tinyssb import crypto, entry
    from bridge_helpers import FAST
    from tssb.bridge.hostnode import HostNode
    path = str(tmp_path / "tssb.db")
    ident = Identity.generate()
    h = HostNode(Store(path), ident, timing=FAST)
    other = Store(path)                       # another process of the same home
    seed = bytes(range(32))
    fid = crypto.publickey(seed)
    author = entry.Author(fid, lambda m: crypto.sign(seed, m))
    other.add_feed(fid)
    pkts = []
    for text in (b"one", b"two " * 60):
        seq, pkt, mid, chunks = author.next(text)
        other.append(fid, seq, pkt, mid)
        other.put_chain(fid, seq, chunks)
        pkts.append(pkt)
    assert h.reload() == 1
    assert h.node.replicas[fid].max_seq == 2 and not h.node.replicas[fid].chains
    assert h.reload() == 0                    # nothing new since
    # the other process stores entry 3 first; the same entry then arrives over the air
    seq, pkt, mid, chunks = author.next(b"three")
    other.append(fid, seq, pkt, mid)
    h.receive(pkt)                            # no exception: the node rereads the feed
    assert h.node.replicas[fid].max_seq == 3
    # our own feed, posted by another process, is sent on as a post of ours would be
    from tssb import ownfeed
    ownfeed.append(other, ident, b"posted elsewhere")
    h.reload()
    assert h.node.author.seq == 1 and h.post(b"posted here") == 2
    assert h.store.front(ident.public)[0] == 2
    other.close()
    h.store.close()


def test_board_that_never_answers_and_a_busy_port(tmp_path):
    """A pty with nothing behind it: within a few seconds the bridge says no board answers
    and why that may be (on main it said "board up" every 10 s); a second bridge on the
    same port is refused with one line, and so is `tssb listen`."""
    home = str(tmp_path / "h")
    assert cli("id", "--home", home)[0] == 0
    master, slave = pty.openpty()
    name = os.ttyname(slave)
    bridge = spawn("bridge", "--port", name, "--home", home, "--duration", 30)
    try:
        wait_line(bridge, "connected")
        line, took = wait_line(bridge, "no board answers", 15)
        assert took < 10 and name in line and "tssb deploy" in line and "--list" in line, line
        code, out, err = cli("bridge", "--port", name, "--home", home, "--duration", "1")
        assert code == 1 and "in use by another process" in err, (code, err)
        assert len(err.strip().splitlines()) == 1
        code, out, err = cli("listen", "--port", name, "--duration", "1")
        assert code == 1 and "in use by another process" in err, (code, err)
    finally:
        stop(bridge)
        os.close(master)
        os.close(slave)
