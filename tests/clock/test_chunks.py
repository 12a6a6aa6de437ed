"""Side chains over the clock sync: feed events carry the chunks of their chain20 side
chain, checked hash by hash before anything is stored; bad chunks end the sync with a
reason; the per-event and per-message bounds hold."""
import pytest

from clock_helpers import Feed, feed_repo, pump, put, stored_chains, sync, thread_repo
from tssb.clock import events as E
from tssb.clock.errors import ClockError
from tssb.clock.sync import EVENTS, MAX_MSG_BYTES, NODES, SyncMachine
from tssb.clock.wire import varint

# contents: inline only (no chunk), 1, 3 and 10 chunks, plus plain entries in between
SIZES = (10, 100, 300, 1000)


def chained(name, plain=2):
    f = Feed(name).extend(plain)
    for size in SIZES:
        f.post(bytes((i * 7 + size) % 251 for i in range(size)))
    return f


def expected(f):
    return {seq: list(f.chunks.get(seq, [])) for seq in range(1, len(f.raws) + 1)}


def item(raw, chunks):
    return varint(len(raw)) + raw + varint(len(chunks)) + b"".join(chunks)


def in_round(repo, key):
    """A machine in entity mode that has started round 1 (as after the peer's HELLO)."""
    m = SyncMachine(repo, "entity")
    m.receive(SyncMachine(feed_repo(), "entity", key=key).start()[0])
    return m


@pytest.mark.parametrize("mode", ["feeds", "entity"])
def test_side_chains_arrive_complete(mode):
    """Side-chained posts held by A only (B has the first entries, with their chunks, or
    nothing of a feed) arrive with every chunk, byte for byte."""
    feeds = [chained("sc%d" % i) for i in range(3)] if mode == "feeds" else [chained("one")]
    a, b = feed_repo(), feed_repo()
    for i, f in enumerate(feeds):
        put(a.store, f.raws, f.chunks)
        put(b.store, f.raws[:i + 1], f.chunks)
    sa, sb, ma, mb = sync(a, b, mode=mode, key=feeds[0].fid if mode == "entity" else None)
    assert sa["ok"] and sb["ok"]
    for f in feeds:
        assert stored_chains(b.store, f.fid) == expected(f) == stored_chains(a.store, f.fid)
    held = sum(len(f.chunks.get(s, ())) for i, f in enumerate(feeds) for s in range(1, i + 2))
    assert mb.stats["chunks_recv"] == sum(sum(map(len, f.chunks.values())) for f in feeds) - held
    assert sa["chunks_sent"] == mb.stats["chunks_recv"] and sb["chunks_recv"] > 0


def test_events_waiting_in_pending_keep_their_chunks():
    f = chained("pend", plain=0)
    b = feed_repo()
    b.store.add_feed(f.fid)
    m = in_round(b, f.fid)
    seqs = range(len(f.raws), 0, -1)      # newest first: all but the last one must wait
    m.receive(bytes([EVENTS]) + varint(len(f.raws)) +
              b"".join(item(f.raws[s - 1], f.chunks[s]) for s in seqs))
    assert not m.pending and m.pending_chunks == 0
    assert stored_chains(b.store, f.fid) == expected(f)


def test_chain_longer_than_the_bound_sends_its_first_chunks():
    """A 150-chunk chain travels with its first MAX_EVENT_CHUNKS chunks; the rest is left
    to the replica's WANT/CHNK or SETU (not part of the digest, so the sync converges)."""
    f = Feed("long").post(bytes(range(256)) * 60)       # 15 360 bytes: 154 chunks
    assert len(f.chunks[1]) > E.MAX_EVENT_CHUNKS
    a, b = feed_repo(), feed_repo()
    put(a.store, f.raws, f.chunks)
    b.store.add_feed(f.fid)
    sa, sb, ma, mb = sync(a, b)
    assert sa["ok"] and sb["ok"] and b.store.front(f.fid)[0] == 1
    assert stored_chains(b.store, f.fid)[1] == f.chunks[1][:E.MAX_EVENT_CHUNKS]


def test_messages_stay_under_the_size_bound():
    """20 entries with 100 chunks each (240 kB): EVENTS and NODES are split."""
    f = Feed("big")
    for i in range(20):
        f.post(bytes([i]) * 10000)
    a, b = feed_repo(), feed_repo()
    put(a.store, f.raws, f.chunks)
    b.store.add_feed(f.fid)
    sizes = []
    ma, mb = SyncMachine(a, "feeds"), SyncMachine(b, "feeds")
    pump(ma, mb, lambda src, msg: sizes.append((msg[0], len(msg))) or [msg])
    assert ma.converged and mb.converged
    assert stored_chains(b.store, f.fid) == expected(f)
    big = [n for t, n in sizes if t in (EVENTS, NODES)]
    assert sum(big) > 3 * MAX_MSG_BYTES and max(big) <= MAX_MSG_BYTES + 16


# -- refused chunks -----------------------------------------------------------------------

def _refused(raw_item, feed):
    """Send one EVENTS item to a fresh machine; returns (ClockError, repo)."""
    b = feed_repo()
    b.store.add_feed(feed.fid)
    m = in_round(b, feed.fid)
    with pytest.raises(ClockError) as ei:
        m.receive(bytes([EVENTS]) + varint(1) + raw_item)
    assert m.state == "error"
    return ei.value, b


def _nothing_stored(repo, fid):
    assert repo.store.front(fid)[0] == 0 and repo.store.chunk_count(fid, 1) == 0


@pytest.mark.parametrize("index", [0, 1, 2])
def test_tampered_chunk_is_refused(index):
    f = Feed("tamper").post(b"x" * 300)
    chunks = list(f.chunks[1])
    bad = bytearray(chunks[index])
    bad[5] ^= 1
    chunks[index] = bytes(bad)
    e, b = _refused(item(f.raws[0], chunks), f)
    assert (e.reason, e.detail) == ("chunk_hash", index)
    _nothing_stored(b, f.fid)


def test_good_entry_and_chunks_then_a_bad_one_in_the_same_message():
    """Everything in EVENTS is checked before anything is stored."""
    f = Feed("mixed").post(b"y" * 300).post(b"z" * 300)
    bad = list(f.chunks[2])
    bad[2] = bad[2][:-1] + bytes([bad[2][-1] ^ 1])
    b = feed_repo()
    b.store.add_feed(f.fid)
    m = in_round(b, f.fid)
    with pytest.raises(ClockError) as ei:
        m.receive(bytes([EVENTS]) + varint(2) + item(f.raws[0], f.chunks[1]) + item(f.raws[1], bad))
    assert ei.value.reason == "chunk_hash"
    _nothing_stored(b, f.fid)


def test_too_many_chunks_refused_before_reading_them():
    f = Feed("huge").post(bytes(20000))
    raw = f.raws[0]
    e, b = _refused(varint(len(raw)) + raw + varint(E.MAX_EVENT_CHUNKS + 1), f)
    assert e.reason == "too_many_chunks"
    e, _ = _refused(varint(len(raw)) + raw + varint(1 << 60), f)   # no such allocation
    assert e.reason == "too_many_chunks"
    _nothing_stored(b, f.fid)


def test_more_chunks_than_the_chain_has():
    f = Feed("short").post(b"s" * 300)
    e, b = _refused(item(f.raws[0], f.chunks[1] + [f.chunks[1][-1]]), f)
    assert e.reason == "chunk_count"
    _nothing_stored(b, f.fid)


def test_chunks_on_a_plain_entry():
    f = Feed("plain").extend(1)
    e, b = _refused(item(f.raws[0], [bytes(120)]), f)
    assert e.reason == "chunk_type"
    _nothing_stored(b, f.fid)


def test_truncated_chunk():
    f = Feed("trunc").post(b"t" * 300)
    raw = f.raws[0]
    e, _ = _refused(varint(len(raw)) + raw + varint(1) + f.chunks[1][0][:60], f)
    assert e.reason == "short"


def test_signed_events_carry_no_chunks():
    with pytest.raises(ClockError) as ei:
        thread_repo().parse(E.make_signed_event(bytes(32), E.ZERO_ROOT, (), 1, b"t").raw,
                            [bytes(120)])
    assert ei.value.reason == "chunks"
