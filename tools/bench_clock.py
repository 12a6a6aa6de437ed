"""Bloom-clock sync next to SETU and a naive baseline: bytes and round trips to bring two
peers to the same feeds.

Cases: n common feeds (10, 100) of 20 entries each; peer B misses m entries (1, 10, 100)
at the ends of random feeds. One more case has side-chained posts (n=10, m=10, chain20
entries of 300 content bytes: 3 chunks each), and the stores must then also hold the
same chunks. The three protocols run on exactly the same feed data, each
on fresh copies of the two stores, over `tssb.channel.memory_pair` with their own drivers:

  clock  SyncMachine "feeds" mode (protocol 3), `tssb.clock.driver.run_sync`.
  setu   `tssb.setu.driver.reconcile` on both ends, elements from `StoreSource` (one
         176-byte element per entry: FID, SEQ, PREV, PKT), B initiates.
  naive  measured here: both send VECTOR (every FID with its front seq), then each sends
         the entries the other lacks as 176-byte feed events (FID, SEQ, PREV, PKT; same
         self-checking form as the other two ship), each followed by a chunk count and its
         side-chain chunks, in ENTRIES messages, the last one LAST.

Bytes are the protocol messages both ways (session framing and encryption, equal for all
three, not counted). Round trips = ceil(depth / 2), where depth is the longest causal chain
of one-way messages: a message sent while handling a received one is one deeper than every
message received so far. After every run both stores must hold the same feeds with all
entries and chunks. Per-message-type byte counts show where each protocol's bytes go; clock
NODES are split into LEAF nodes (the events themselves, answered or nested) and tree nodes
(INNER/KEYED/FORK/unknown, nested ones included), and side-chain chunks inside events are
counted apart ("chunks").

To tag messages with their depth, the bench wraps each machine's start/receive (the SETU
driver builds its Reconciler itself, so its name is patched in the driver for the run).
Prints one JSON object per (case, protocol) and one summary per case with the ratios to
the naive run of the same case.
"""
import asyncio
import collections
import hashlib
import json
import random
import sqlite3
import time
from unittest import mock

from tinyssb.store import MemStore
from tssb.channel import memory_pair
from tssb.clock import crypto
from tssb.clock import dag as D
from tssb.clock import events as E
from tssb.clock import sync as S
from tssb.clock.driver import run_sync
from tssb.clock.repo import FeedRepo
from tssb.clock.wire import Reader, varint
from tssb.setu import constants as SC
from tssb.setu import driver as setu_driver
from tssb.setu.machine import Config, Reconciler
from tssb.setu.tinyssb_elements import StoreSource, mid_of

ENTRIES = 20
CLOCK_N, CLOCK_K = 128, 4
CLOCK_NAMES = {S.HELLO: "HELLO", S.FILTER: "FILTER", S.STATUS: "STATUS", S.EVENTS: "EVENTS",
               S.REQC: "REQC", S.NODES: "NODES", S.NOTCOMMON: "NOTCOMMON",
               S.ENDR: "ENDR", S.ERROR: "ERROR"}


# -- data ---------------------------------------------------------------------------------

def make_feeds(n, post=0):
    """n feeds of ENTRIES entries as (event, chunks): plain48 entries, or with post > 0
    chain20 entries of `post` content bytes (side chain of ceil((post - 27) / 100) chunks)."""
    feeds = []
    for i in range(n):
        seed = hashlib.sha256(b"bench%d" % i).digest()
        fid = crypto.publickey(seed)
        prev, items = fid[:20], []
        for seq in range(1, ENTRIES + 1):
            text = b"bench %d %d" % (i, seq)
            if post:
                content = ((text + b" ") * post)[:post]
                pkt, mid, chunks = E.make_chain_entry(seed, seq, prev, content)
            else:
                (pkt, mid), chunks = E.make_entry(seed, seq, prev, text), []
            items.append((E.feed_event_bytes(fid, seq, prev, pkt), chunks))
            prev = mid
        feeds.append(items)
    return feeds


def append_event(store, raw, chunks=()):
    """Append a feed event and its chunks (checked against the entry's hash chain)."""
    ev = E.parse_feed_event(raw, chunks)      # validates DMX, signature, chunk hashes
    store.add_feed(ev.key)
    top, mid = store.front(ev.key)
    if ev.seq != top + 1 or raw[36:56] != mid:
        raise ValueError("event does not extend the log")
    store.append(ev.key, ev.seq, raw[56:], ev.eid)
    for cnr, c in enumerate(ev.chunks):
        store.put_chunk(ev.key, ev.seq, cnr, c)


def stores(feeds, cut):
    """A holds every entry and chunk, B misses the last cut[i] entries of feed i."""
    a, b = MemStore(), MemStore()
    for i, items in enumerate(feeds):
        for raw, chunks in items:
            append_event(a, raw, chunks)
        for raw, chunks in items[:ENTRIES - cut[i]]:
            append_event(b, raw, chunks)
    return a, b


def same_feeds(a, b):
    """Both stores hold every entry and every chunk, byte for byte."""
    fa = sorted((f, a.front(f)) for f in a.feeds())
    if fa != sorted((f, b.front(f)) for f in b.feeds()) or any(s != ENTRIES for _, (s, _m) in fa):
        return False
    for f, _ in fa:
        for seq in range(1, ENTRIES + 1):
            n = a.chunk_count(f, seq)
            if n != b.chunk_count(f, seq) or n != E.chain_chunks(a.entry(f, seq)) or any(
                    a.chunk(f, seq, c) != b.chunk(f, seq, c) for c in range(n)):
                return False
    return True


# -- tracing: bytes per message type and causal depth --------------------------------------

class Trace:
    """Shared state of one run: per-direction depth queues and byte counts by type."""

    def __init__(self, classify):
        self.classify = classify
        self.pipes = {"ab": collections.deque(), "ba": collections.deque()}
        self.by_type = {"ab": collections.Counter(), "ba": collections.Counter()}
        self.bytes = {"ab": 0, "ba": 0}
        self.msgs = 0
        self.depth = 0

    def ends(self, max_queue=64):
        ca, cb = memory_pair(max_queue)
        ea, eb = End(), End()
        return (TracedChannel(ca, ea, self, "ab", "ba"), ea,
                TracedChannel(cb, eb, self, "ba", "ab"), eb)


class End:
    """Depth bookkeeping of one end: `cur` is the deepest message received so far."""

    def __init__(self):
        self.cur = 0
        self.out = collections.deque()   # depths of produced, not yet sent messages

    def tag(self, msgs):
        self.out.extend([self.cur + 1] * len(msgs))
        return msgs

    def wrap(self, machine, start="start", receive="receive"):
        s, r = getattr(machine, start), getattr(machine, receive)
        setattr(machine, start, lambda: self.tag(s()))
        setattr(machine, receive, lambda msg: self.tag(r(msg)))
        return machine


class TracedChannel:
    """A Channel that records type, size and causal depth of every message (the
    drivers send a machine's outputs in order, so depths are matched FIFO)."""

    def __init__(self, inner, end, trace, out_dir, in_dir):
        self.inner, self.end, self.trace = inner, end, trace
        self.out_dir, self.in_dir = out_dir, in_dir

    async def send(self, msg):
        d = self.end.out.popleft() if self.end.out else self.end.cur + 1
        t = self.trace
        t.pipes[self.out_dir].append(d)
        t.depth = max(t.depth, d)
        t.bytes[self.out_dir] += len(msg)
        t.msgs += 1
        for name, size in t.classify(bytes(msg)):
            t.by_type[self.out_dir][name] += size
        await self.inner.send(msg)

    async def recv(self):
        msg = await self.inner.recv()
        self.end.cur = max(self.end.cur, self.trace.pipes[self.in_dir].popleft())
        return msg

    def close(self):
        self.inner.close()

    def __getattr__(self, name):   # sent_bytes, recv_bytes, sent_msgs, recv_msgs
        return getattr(self.inner, name)


def classify_clock(msg):
    """(name, bytes) parts of a clock message: NODES split into LEAF and tree nodes, the
    side-chain chunks inside events (EVENTS or LEAF) counted apart as "chunks"."""
    t = msg[0]
    if t not in (S.NODES, S.EVENTS):
        return [(CLOCK_NAMES.get(t, "?%d" % t), len(msg))]
    r = Reader(msg)
    r.byte()
    cnt = r.uint()
    leaf = tree = chunks = 0

    def item():
        r.blob()
        j = r.uint()
        r.take(j * E.CHUNK_LEN)
        return j * E.CHUNK_LEN

    def node():   # a node and the nodes nested in it (tag bits X_FIRST, X_SECOND)
        nonlocal leaf, tree, chunks
        p0, tag = r.pos, r.byte()
        if tag == D.T_LEAF:
            c = item()
            chunks += c
            leaf += r.pos - p0 - c
            return
        if tag == S.N_UNKNOWN:
            r.take(32)
        else:
            if tag & 0x0F == D.T_KEYED:
                r.blob()
            for bit in (S.X_FIRST, S.X_SECOND)[:2 if tag & 0x0F == D.T_INNER else 1]:
                if tag & bit:
                    tree += r.pos - p0
                    node()
                    p0 = r.pos
                else:
                    r.take(32)
        tree += r.pos - p0
    for _ in range(cnt):
        if t == S.EVENTS:
            p0 = r.pos
            c = item()
            chunks += c
            leaf += r.pos - p0 - c
        else:
            node()
    if t == S.EVENTS:
        return [("EVENTS", r.pos - chunks), ("chunks", chunks)]
    return [("NODES_header", r.pos - leaf - tree - chunks), ("NODES_leaf", leaf),
            ("NODES_tree", tree), ("chunks", chunks)]


def classify_setu(msg):
    t = int.from_bytes(msg[2:4], "big")
    return [(SC.MSG_NAMES.get(t, "?%d" % t), len(msg))]


# -- the three protocols -------------------------------------------------------------------

def run_clock(a, b):
    ra = FeedRepo(a, sqlite3.connect(":memory:"), CLOCK_N, CLOCK_K)
    rb = FeedRepo(b, sqlite3.connect(":memory:"), CLOCK_N, CLOCK_K)
    tr = Trace(classify_clock)
    ca, ea, cb, eb = tr.ends()
    ma = ea.wrap(S.SyncMachine(ra, "feeds", n=CLOCK_N, k=CLOCK_K))
    mb = eb.wrap(S.SyncMachine(rb, "feeds", n=CLOCK_N, k=CLOCK_K))

    async def main():
        async def resp():
            return await run_sync(cb, mb, first=await cb.recv())
        return await asyncio.gather(run_sync(ca, ma), resp())
    sa, sb = asyncio.run(main())
    assert sa["ok"] and sb["ok"], (sa, sb)
    st = lambda key: ma.stats[key] + mb.stats[key]   # noqa: E731
    return tr, {"status_rounds": sa["rounds"], "proactive_events": st("events_sent"),
                "descent_nodes": st("nodes_recv"), "pulls": st("pulls"),
                "pulls_skipped": st("pulls_skipped"), "events_dup": st("events_dup"),
                "pended": st("pended"), "chunks_moved": st("chunks_recv")}


def run_setu(a, b):
    tr = Trace(classify_setu)
    ca, ea, cb, eb = tr.ends()
    sa, sb = StoreSource(a), StoreSource(b)
    sa.refresh()
    sb.refresh()

    def traced_reconciler(eset, initiator, config=None):
        return (eb if initiator else ea).wrap(Reconciler(eset, initiator, config))

    async def main():
        return await asyncio.gather(setu_driver.reconcile(ca, sa.eset, False, Config()),
                                    setu_driver.reconcile(cb, sb.eset, True, Config()))
    with mock.patch.object(setu_driver, "Reconciler", traced_reconciler):
        ra, rb = asyncio.run(main())
    assert ra["ok"] and rb["ok"]
    return tr, {"mode": rb["mode"], "ibf_rounds": rb["rounds"],
                "decode_failures": ra["decode_failures"] + rb["decode_failures"],
                "elements_moved": rb["elements_recv"] + ra["elements_recv"]}


VECTOR, ENTRIES_MSG, LAST = 1, 2, 3


class Naive:
    """Sans-IO naive sync: VECTOR = varint n, (FID 32, seq 4) * n; then ENTRIES* and LAST =
    varint c, (event(176), varint j, chunk(120) * j) * c, carrying every entry the peer's
    vector shows it lacks with the chunks of its side chain."""

    def __init__(self, store):
        self.store = store
        self.got_last = self.sent_last = False

    @property
    def finished(self):
        return self.got_last and self.sent_last

    def start(self):
        fids = sorted(self.store.feeds())
        return [bytes([VECTOR]) + varint(len(fids)) +
                b"".join(f + self.store.front(f)[0].to_bytes(4, "big") for f in fids)]

    def receive(self, msg):
        r = Reader(msg)
        t = r.byte()
        if t == VECTOR:
            events = []
            for _ in range(r.uint()):
                fid, seq = r.take(32), int.from_bytes(r.take(4), "big")
                if not self.store.has_feed(fid):
                    continue
                top, _ = self.store.front(fid)
                if top <= seq:
                    continue
                prev = mid_at(self.store, fid, seq)
                for s in range(seq + 1, top + 1):
                    pkt = self.store.entry(fid, s)
                    chunks = [self.store.chunk(fid, s, c)
                              for c in range(self.store.chunk_count(fid, s))]
                    events.append(E.feed_event_bytes(fid, s, prev, pkt) + varint(len(chunks)) +
                                  b"".join(chunks))
                    prev = mid_of(fid, s, prev, pkt)
            out = []
            for i in range(0, max(len(events), 1), S.MAX_BATCH):
                part = events[i:i + S.MAX_BATCH]
                last = i + S.MAX_BATCH >= len(events)
                out.append(bytes([LAST if last else ENTRIES_MSG]) + varint(len(part)) + b"".join(part))
            self.sent_last = True
            return out
        for _ in range(r.uint()):
            raw = r.take(E.FEED_EVENT_LEN)
            append_event(self.store, raw, [r.take(E.CHUNK_LEN) for _ in range(r.uint())])
        self.got_last = t == LAST
        return []


def classify_naive(msg):
    if msg[0] == VECTOR:
        return [("VECTOR", len(msg))]
    r = Reader(msg)
    r.byte()
    chunks = 0
    for _ in range(r.uint()):
        r.take(E.FEED_EVENT_LEN)
        j = r.uint()
        r.take(j * E.CHUNK_LEN)
        chunks += j * E.CHUNK_LEN
    return [("ENTRIES", len(msg) - chunks), ("chunks", chunks)]


def mid_at(store, fid, seq):
    """MID of entry seq (the store keeps the front's; the sender recomputes older ones)."""
    prev = fid[:20]
    for s in range(1, seq + 1):
        prev = mid_of(fid, s, prev, store.entry(fid, s))
    return prev


async def naive_driver(channel, machine):
    for m in machine.start():
        await channel.send(m)
    while not machine.finished:
        for m in machine.receive(await channel.recv()):
            await channel.send(m)


def run_naive(a, b):
    tr = Trace(classify_naive)
    ca, ea, cb, eb = tr.ends()
    na, nb = ea.wrap(Naive(a)), eb.wrap(Naive(b))

    async def main():
        await asyncio.gather(naive_driver(ca, na), naive_driver(cb, nb))
    asyncio.run(main())
    return tr, {}


PROTOCOLS = (("naive", run_naive), ("clock", run_clock), ("setu", run_setu))


# -- main ----------------------------------------------------------------------------------

def cuts(rng, n, m):
    """Remove m entries from the ends of random feeds: entries cut per feed."""
    cut = [0] * n
    for _ in range(m):
        i = rng.randrange(n)
        while cut[i] >= ENTRIES:
            i = rng.randrange(n)
        cut[i] += 1
    return cut


def run_case(case, feeds, cut):
    m = sum(cut)
    payload = sum(len(raw) + len(chunks) * E.CHUNK_LEN
                  for f, c in zip(feeds, cut) for raw, chunks in f[ENTRIES - c:])
    res = {}
    for name, run in PROTOCOLS:
        a, b = stores(feeds, cut)
        t0 = time.perf_counter()
        tr, extra = run(a, b)
        dt = time.perf_counter() - t0
        assert same_feeds(a, b), (name, case)
        total = tr.bytes["ab"] + tr.bytes["ba"]
        res[name] = (total, (tr.depth + 1) // 2, dt)
        line = {"bench": "clock_sync", "case": case, "protocol": name, "bytes": total,
                "bytes_a_to_b": tr.bytes["ab"], "bytes_b_to_a": tr.bytes["ba"],
                "msgs": tr.msgs, "depth": tr.depth, "round_trips": (tr.depth + 1) // 2,
                "missing_entries": m, "payload_bytes": payload,
                "by_type": dict(sorted((tr.by_type["ab"] + tr.by_type["ba"]).items())),
                "by_type_a_to_b": dict(sorted(tr.by_type["ab"].items())),
                "by_type_b_to_a": dict(sorted(tr.by_type["ba"].items())),
                "seconds": round(dt, 3)}
        line.update(extra)
        if name != "naive":
            line["ratio_naive"] = round(total / res["naive"][0], 3)
        print(json.dumps(line), flush=True)
    print(json.dumps({
        "bench": "clock_sync_summary", "case": case,
        "naive_bytes": res["naive"][0], "clock_bytes": res["clock"][0],
        "setu_bytes": res["setu"][0],
        "clock_over_naive": round(res["clock"][0] / res["naive"][0], 3),
        "setu_over_naive": round(res["setu"][0] / res["naive"][0], 3),
        "clock_over_setu": round(res["clock"][0] / res["setu"][0], 3),
        "round_trips": {k: v[1] for k, v in res.items()},
        "seconds_over_naive": {k: round(v[2] / res["naive"][2], 1) for k, v in res.items()
                               if k != "naive"},
    }), flush=True)


def main():
    rng = random.Random(1)
    for n in (10, 100):
        feeds = make_feeds(n)
        for m in (1, 10, 100):
            run_case("n=%d,m=%d" % (n, m), feeds, cuts(rng, n, m))
    # Side-chained posts: 300-byte contents, 3 chunks per entry (SETU ships them as chunk
    # elements, the clock inside its events, naive after each entry).
    run_case("n=10,m=10,post=300", make_feeds(10, 300), cuts(random.Random(2), 10, 10))


if __name__ == "__main__":
    main()
