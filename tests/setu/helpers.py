"""Shared helpers for the SETU tests: random sets, signed feeds, a synchronous pump, the
CLI in process and a `tssb serve` on loopback in a thread."""
import asyncio
import contextlib
import hashlib
import random
import threading

import pytest

from tssb.setu.machine import Reconciler
from tssb.setu.setstate import ElementSet


def make_sets(common, a_only, b_only, seed=0, size=24):
    """Two ElementSets sharing `common` random elements plus their own extras."""
    r = random.Random(seed)
    A, B = ElementSet(), ElementSet()
    for _ in range(common):
        e = r.randbytes(size)
        A.add(e)
        B.add(e)
    a_extra = [r.randbytes(size) for _ in range(a_only)]
    b_extra = [r.randbytes(size) for _ in range(b_only)]
    for e in a_extra:
        A.add(e)
    for e in b_extra:
        B.add(e)
    return A, B


def pump(a, b, tamper=None, max_steps=10 ** 6):
    """Run initiator machine `a` against responder `b` in memory, in order per direction.

    Args:
        tamper: optional callable(direction, msg) -> list of msgs, direction "ab" or "ba".
    Returns:
        the number of messages delivered. SetuError from either machine propagates.
    """
    to_a, to_b = [], []
    ia = ib = 0

    def emit(lst, direction, msgs):
        for m in msgs:
            lst.extend(tamper(direction, m) if tamper else [m])

    emit(to_b, "ab", a.start())
    steps = 0
    while (ia < len(to_a) or ib < len(to_b)) and steps < max_steps:
        if ib < len(to_b):
            m = to_b[ib]
            ib += 1
            emit(to_a, "ba", b.receive(m))
            steps += 1
        if ia < len(to_a):
            m = to_a[ia]
            ia += 1
            emit(to_b, "ab", a.receive(m))
            steps += 1
    return steps


def sync(A, B, cfg_a=None, cfg_b=None, tamper=None):
    a = Reconciler(A, True, cfg_a)
    b = Reconciler(B, False, cfg_b)
    pump(a, b, tamper)
    return a, b


def make_feed(store, seed, n):
    """Append n signed entries to the feed of key `seed` (created if new). Returns its FID."""
    from nacl.signing import SigningKey
    from tssb.setu.tinyssb_elements import mid_of
    sk = SigningKey(hashlib.sha256(seed).digest())
    fid = bytes(sk.verify_key)
    store.add_feed(fid)
    top, prev = store.front(fid)
    for seq in range(top + 1, top + n + 1):
        nam = b"tinyssb-v0" + fid + seq.to_bytes(4, "big") + prev
        head = hashlib.sha256(nam).digest()[:7] + b"\x00" + (b"msg %d" % seq).ljust(48, b"\x00")
        pkt = head + sk.sign(nam + head).signature
        mid = mid_of(fid, seq, prev, pkt)
        store.append(fid, seq, pkt, mid)
        prev = mid
    return fid


def tssb_cli(capsys, *argv):
    """Run `tssb ARGV` in this process. Returns (exit status, stdout, stderr)."""
    from tssb import cli
    with pytest.raises(SystemExit) as e:
        cli.main(list(argv))
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


@contextlib.contextmanager
def served_homes(tmp_path, capsys, posts_a, posts_b, limits=None):
    """Homes a and b with these posts, b serving on loopback in a thread (open mode: any
    key with the network key; a knows it as a peer). Yields (home a, context a, context b,
    b's address, the running SessionServer, its loop)."""
    from tssb.context import Context
    from tssb.session import PeerPolicy, start_server
    ha, hb = str(tmp_path / "a"), str(tmp_path / "b")
    for h, posts in ((ha, posts_a), (hb, posts_b)):
        assert tssb_cli(capsys, "id", "--home", h)[0] == 0
        for text in posts:
            assert tssb_cli(capsys, "post", "--home", h, text)[0] == 0
    ca, cb = Context.open(ha), Context.open(hb)
    cb.set_network_key(ca.network_key)
    loop = asyncio.new_event_loop()
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    try:
        server = asyncio.run_coroutine_threadsafe(start_server(
            cb, "127.0.0.1", 0, policy=PeerPolicy(cb.network_key, open_mode=True),
            limits=limits), loop).result(10)
        peer = "127.0.0.1:%d" % server.port
        ca.store.add_peer(cb.identity.public, addr=peer)
        yield ha, ca, cb, peer, server, loop
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(10)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        t.join(10)
