"""Hostile-input benchmark (issue 15): one JSON object per line.

mesh cases (in memory, virtual time, on the core's Bus; our nodes unless noted):
  junk_replication   a 100-entry feed (short and side-chained entries) copied to an empty
                     node while 10^4 junk CLAIM and NOVELTY packets (random keys, random
                     counts up to 255) arrive interleaved, spread over the time the copy
                     takes without junk; junk reaching the copying node only, then both.
                     Bar: completes, in <= 1.5x the virtual time without junk.
  junk_then_feed     10^4 junk novelties reach a node first; then a real feed is announced
                     (by one of our nodes, then by a deployed-behaviour node): is it learned
                     and replicated, and did any junk become a stored feed?
  ext_flood          the GOSET extension forged (issue 15 hole): 10^4 packets (KEYS of
                     random keys, beacons that decode to the victim's set plus a junk key,
                     random beacons, SYMBOLS for its decoders, REQUESTs) reach the middle
                     node of a line a - b - c while a's 100-entry feed travels to c: does it
                     arrive, how much later, and does any junk key reach c (it must not:
                     keys stay provisional, never announced onward, until an entry verifies)
  ext_then_feed      10^4 forged KEYS (3 random keys each) reach a node; then a real feed is
                     announced by one of our nodes: learned and replicated?

serve cases: a real `tssb serve` process on loopback, flooded for --seconds by one (or
--attackers) allowed peer(s) that reconnect whenever they are cut off, while a legitimate
`tssb sync` from another peer starts --sync-at seconds in and must finish before the flood
ends. Measured: the server's RSS growth over its idle size (VmRSS from /proc, sampled every
0.1 s), the worst event-loop lag the server reports (`tssb serve --stats-every`: a timer
task's lateness, worst per 0.5 s interval), the sync's time against a run without attack
(ratio), and why the server cut the attacker off. Floods:
  open flood       OPEN frames for a service that does not exist, never reading (item 4)
  fake elements    full mode with fake side-chain chunks, up to 2**26 declared (item 5)
  maximum IBF      an operation request declaring 2**26 elements, then the largest IBFs
                   the budget lets it send, random so every decode fails (item 6)
  crafted flights  (issue 34) sessions from 4 keys and addresses (8 sessions a key at most)
                   sending RL_REQUESTs crafted against the server's own set (its first 64
                   symbols, the most it accepts, XOR garbage, its own probe bits: every key a
                   search candidate), two streams a session; the server holds --big-entries
                   entries
  one key's sessions  (issue 34) one key connecting as often as it can, each session keeping
                   a stream open: how many it gets, what it is told, and a second key's sync
  endless flights  (issue 34) sessions from 4 keys, 2 setu streams each, first flights that
                   never end (refused past one message) and, after an honest-looking first
                   flight, RL messages that never END (charged until the session's
                   received_bytes budget cuts it off), reconnecting
  every budget     (issue 34) one session at a time filling two budgets at once: endless RL
                   flights on one setu stream, fake full-mode chunks on the other (the
                   measured worst case of one session)
Bars: RSS growth <= 64 MiB per attacking session (issue 34's floods: <= 80 MiB per session
and <= 1 GiB in all), the sync completes during the attack (with crafted flights on a
10^5-entry server: within 10 s), no loop stall > 100 ms.

rateless case (in this process, no sockets; issue 34): a responder of --rl-elements random
keys (10^6) handles crafted first flights: CPU seconds and traced peak growth per
operation (bars: <= 0.5 s, <= 64 MiB), for the search-maximising flight with 21 and 256
symbols, a flight whose probes claim a huge difference (the key-list answer), a MORE up to
the symbol limit, and the same key's crafted flights repeated (each limit hit halves its
next search); and the responder's kept state (bytes, as saved in the store, and the CPU
time of loading it: every setu stream loads its own copy). Besides the loop's worst lag the server reports how much of that
tick its loop thread waited for a CPU (Linux schedstat: other processes had it), and its
worst stall net of such waits (`loop_stall_max_ms`: our code, or a worker holding the GIL);
on a quiet machine the two agree. The attacker runs in this process at nice +10,
the server and the sync at the caller's priority (in deployment the attacker is another
machine, not a competitor for our 2 cores); attacker sessions come from 127.0.0.2, so the
server's per-address connection limit does not count them against the legitimate peer.

Usage: python tools/bench_hostile.py [--only mesh|serve|rateless] [--junk 10000] [--seconds 25]
                                     [--attackers 1] [--floods NAME,...] [--big-entries 100000]
                                     [--rl-elements 1000000]
"""
import argparse
import asyncio
import gc
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "host"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "shared"))

import numpy as np  # noqa: E402
from nacl.signing import SigningKey  # noqa: E402
from tinyssb import crypto, entry  # noqa: E402
from tinyssb.bus import Bus, same_stores  # noqa: E402
from tinyssb.dmx import GOSET_DMX  # noqa: E402
from tinyssb.goset import DEPLOYED, EXTENDED  # noqa: E402
from tinyssb.node import Node  # noqa: E402
from tinyssb.store import MemStore  # noqa: E402
from tssb.context import Context  # noqa: E402
from tssb.channel import ChannelClosed  # noqa: E402
from tssb.session import mux as MX  # noqa: E402
from tssb.session.net import Session, client_handshake  # noqa: E402
from tssb.session.budget import Limits  # noqa: E402
from tssb.session.errors import StreamRefused  # noqa: E402
from tssb.setu import constants as C  # noqa: E402
from tssb.setu import ibf as I  # noqa: E402
from tssb.setu import messages as M  # noqa: E402
from tssb.setu import policy  # noqa: E402
from tssb.setu import rateless as RL  # noqa: E402
from tssb.setu.machine import DEFAULT_APP_ID, Config, Reconciler  # noqa: E402
from tssb.setu.rateless_prefix import RatelessPrefix  # noqa: E402
from tssb.setu.rateless_store import RatelessStoreSet  # noqa: E402
from tssb.store import open_store  # noqa: E402
from tssb.setu.tinyssb_elements import ELEMENT_TYPE, make_chunk_element  # noqa: E402

TIME_BOUND = 1.5        # junk may slow a copy down by this much (issue 15, Benchmark)
STEP_MS = 100           # bus step
LIMIT_MS = 3600 * 1000  # a copy that takes an hour of virtual time has failed
RSS_BOUND_MIB = 64      # per attacking session (issue 15, Benchmark)
ISSUE34_RSS_PER_SESSION_MIB = 80    # issue 34's floods: per session, and
ISSUE34_RSS_TOTAL_MIB = 1024        # ... in all
BIG_SYNC_BOUND_S = 10.0  # a sync on a 10^5-entry server under crafted flights (issue 34)
RL_CPU_BOUND_S = 0.5     # a crafted first flight at 10^6 elements: CPU seconds, and
RL_PEAK_BOUND_MIB = 64   # ... traced peak growth (issue 34)
LAG_BOUND_MS = 100
SAMPLE_S = 0.1
CLAIMED = 1 << 26       # the byzantine upper bound: the largest count a peer may declare
ATTACKER_ADDR = "127.0.0.2"
ATTACKER_NICE = 10
_BASE_PRIORITY = os.getpriority(os.PRIO_PROCESS, 0)


def emit(**rec):
    print(json.dumps(rec), flush=True)


def _progress(text):
    print(text, file=sys.stderr, flush=True)


# -- mesh: junk GOSET packets, in memory ---------------------------------------------------

def _node(seed, identity=None, mode=EXTENDED):
    r = random.Random(seed)
    return Node(MemStore(), identity=identity, mode=mode,
                rand=lambda n: r.randrange(n) if n > 1 else 0)


def _author(seed, n_entries, mode=EXTENDED):
    s = bytes([seed & 0xFF]) * 32
    a = _node(seed, (s, crypto.publickey(s)), mode)
    r = random.Random(seed)
    for _ in range(n_entries):
        a.post(r.randbytes(r.choice((20, 40, 150, 400))))
    return a


def _junk(r, claims):
    if claims and r.random() < 0.5:
        lo, hi = sorted((r.randbytes(32), r.randbytes(32)))
        return GOSET_DMX + b"c" + lo + hi + r.randbytes(32) + bytes((r.randrange(2, 256),))
    return GOSET_DMX + b"n" + r.randbytes(32)


def _run(bus, victims, make, junk, rate, seed):
    """Step `bus` until its nodes' stores agree while, before every step, `rate` packets
    from make(r, victim) reach each of `victims`, `junk` in all. Returns (ms, complete,
    sent)."""
    r = random.Random(seed + 7)
    sent = 0
    t = 0
    while t < LIMIT_MS:
        t += STEP_MS
        for _ in range(rate):
            if sent >= junk:
                break
            for v in victims:
                v.on_packet(make(r, v), t)
            sent += 1
        bus.step(t)
        if same_stores(bus.nodes):
            return t, True, sent
    return t, False, sent


def _copy(junk, rate, targets, seed=3):
    """Copy a 100-entry feed from a to b while `rate` junk packets reach each of
    `targets` (indices into [a, b]) before every step. Returns (ms, complete, b, bus,
    sent)."""
    a, b = _author(seed, 100), _node(seed + 1)
    bus = Bus([a, b])
    t, ok, sent = _run(bus, [[a, b][i] for i in targets], lambda r, v: _junk(r, True), junk,
                       rate, seed)
    return t, ok, b, bus, sent


def junk_replication(args):
    t0, ok0, _, _, _ = _copy(0, 0, [])
    emit(bench="hostile", case="junk_replication", junk=0, complete=ok0, time_s=t0 / 1000)
    steps = max(1, t0 // STEP_MS)
    for name, targets in (("copying node", [1]), ("both nodes", [0, 1])):
        w0 = time.perf_counter()
        rate = -(-args.junk // steps)
        t, ok, b, bus, sent = _copy(args.junk, rate, targets)
        emit(bench="hostile", case="junk_replication", junk=sent, junk_reaches=name,
             complete=ok, time_s=t / 1000, ratio=round(t / t0, 2), bound=TIME_BOUND,
             ok=ok and t <= TIME_BOUND * t0, goset=len(b.goset),
             stored_feeds=len(b.store.feeds()),
             junk_dropped={k: v for k, v in b.counters.items() if k.startswith("drop_")},
             wall_s=round(time.perf_counter() - w0, 2))


def junk_then_feed(args):
    for author_mode in (EXTENDED, DEPLOYED):
        b = _node(11)
        r = random.Random(12)
        w0 = time.perf_counter()
        for i in range(args.junk):
            b.on_packet(_junk(r, False), i // 10)
        full = len(b.goset)
        a = _author(13, 10, author_mode)
        bus = Bus([a, b])
        bus.now = args.junk // 10
        t0 = bus.now
        fid = a.author.fid
        t = bus.run(t0 + LIMIT_MS, STEP_MS, stop=lambda: same_stores([a, b]))
        emit(bench="hostile", case="junk_then_feed", junk=args.junk,
             author="ours" if author_mode == EXTENDED else "deployed",
             goset_after_junk=full, learned=fid in b.goset,
             replicated=same_stores([a, b]), time_s=round((t - t0) / 1000, 1),
             stored_feeds=len(b.store.feeds()), wall_s=round(time.perf_counter() - w0, 2))


def _forged_ext(r, victim):
    """A forged extension packet from an attacker that hears the victim's beacons and
    requests (so it knows the victim's symbol 0 and its decoders' tags)."""
    from tinyssb import gosetx as X
    from tinyssb.hotloops import xor_bytes
    ext = victim.ext
    k = r.randrange(6)
    if k == 0 or (k in (1, 2) and ext.enc is None):
        return X.DMX + b"k" + r.randbytes(2 + 32 * (1 + r.randrange(3)))
    if k in (1, 2):     # beacon or REPLY of the victim's set plus one junk key
        s0 = ext.enc.encode(0, 1)
        j = r.randbytes(32)
        sym = (xor_bytes(s0[:32], j) + xor_bytes(s0[32:35], X._chk(j))
               + bytes(((s0[35] + 1) & 0xFF,)))
        return X.DMX + (b"b" if k == 1 else b"B") + r.randbytes(4) + sym
    if k == 3:
        return X.DMX + b"b" + r.randbytes(40)
    if k == 4:
        tag = ext.decoders[0].tag if ext.decoders else r.randbytes(2)
        return X.DMX + b"s" + tag + (1 + r.randrange(30)).to_bytes(2, "big") + r.randbytes(108)
    return X.DMX + b"r" + (ext.tag or bytes(2)) + (1 + r.randrange(200)).to_bytes(2, "big") + b"\x06"


def _line_copy(junk, rate, seed=3):
    """a's 100-entry feed to c over b (a - b - c) while `rate` forged extension packets
    reach b before every step, `junk` in all. Returns (ms, complete, b, c, sent)."""
    a, b, c = _author(seed, 100), _node(seed + 1), _node(seed + 2)
    bus = Bus([a, b, c], links={(0, 1), (1, 2)})
    t, ok, sent = _run(bus, [b], _forged_ext, junk, rate, seed)
    return t, ok, b, c, sent


def ext_flood(args):
    t0, ok0, _, _, _ = _line_copy(0, 0)
    emit(bench="hostile", case="ext_flood", junk=0, complete=ok0, time_s=t0 / 1000)
    w0 = time.perf_counter()
    rate = -(-args.junk // max(1, t0 // STEP_MS))
    t, ok, b, c, sent = _line_copy(args.junk, rate)
    fid = _author(3, 0).author.fid
    emit(bench="hostile", case="ext_flood", junk=sent, junk_reaches="middle node",
         complete=ok, time_s=t / 1000, ratio=round(t / t0, 2),
         contained=ok and c.goset.keys == [fid] and b.store.feeds() == [fid],
         junk_keys_behind=len([k for k in c.goset.keys if k != fid]),
         middle_stored_feeds=len(b.store.feeds()), middle_goset=len(b.goset),
         middle_counters={k: v for k, v in sorted(b.counters.items())
                          if k.startswith(("drop_", "ext_"))},
         wall_s=round(time.perf_counter() - w0, 2))


def ext_then_feed(args):
    from tinyssb import gosetx as X
    b = _node(11)
    r = random.Random(12)
    w0 = time.perf_counter()
    for i in range(args.junk):
        b.on_packet(X.DMX + b"k" + r.randbytes(98), i // 10)
    full = len(b.goset)
    a = _author(13, 10)
    bus = Bus([a, b])
    bus.now = t0 = args.junk // 10
    fid = a.author.fid
    t = bus.run(t0 + LIMIT_MS, STEP_MS, stop=lambda: same_stores([a, b]))
    emit(bench="hostile", case="ext_then_feed", junk=args.junk, goset_after_junk=full,
         learned=fid in b.goset, replicated=same_stores([a, b]),
         time_s=round((t - t0) / 1000, 1), stored_feeds=len(b.store.feeds()),
         wall_s=round(time.perf_counter() - w0, 2))


def mesh_cases(args):
    """Junk GOSET and forged extension packets against replication (issue 15, items
    1-3, and the extension's hole)."""
    junk_replication(args)
    junk_then_feed(args)
    ext_flood(args)
    ext_then_feed(args)


# -- serve: the homes of a server, a legitimate peer and an attacker ---------------------

def _write_feed(store, seed, n, rng):
    """n signed entries (a third with side chains) on the feed of `seed`."""
    sk = SigningKey(seed)
    author = entry.Author(bytes(sk.verify_key), lambda m: sk.sign(m).signature)
    store.add_feed(author.fid)
    with store.transaction():
        for _ in range(n):
            seq, pkt, mid, chunks = author.next(rng.randbytes(rng.choice((20, 40, 40, 300))))
            store.append(author.fid, seq, pkt, mid)
            for c, chunk in enumerate(chunks):
                store.put_chunk(author.fid, seq, c, chunk)


ATTACKER_KEYS = 4       # attacking identities (a key gets 8 of the 32 sessions at most)


def build_homes(root, entries, legit_behind=None):
    """Server (feeds of 3 authors), legitimate peer (most of them plus its own), attackers
    (ATTACKER_KEYS identities, "attacker" the first). The legitimate peer lacks the last
    fifth of each feed, or the last `legit_behind` entries; both have their rateless state.

    Returns: dict name -> home directory, and the server's public key.
    """
    names = ["server", "legit", "attacker"] + ["attacker%d" % i for i in range(1, ATTACKER_KEYS)]
    homes = {n: os.path.join(root, n) for n in names}
    ctx = {n: Context.open(h) for n, h in homes.items()}
    key = ctx["server"].network_key
    for n in names[1:]:
        ctx[n].set_network_key(key)
        ctx["server"].store.add_peer(ctx[n].identity.public, n)
    per = max(1, entries // 3)
    behind = per // 5 if legit_behind is None else legit_behind
    for i in range(3):
        seed = bytes([i + 1]) * 32
        _write_feed(ctx["server"].store, seed, per, random.Random(i))
        _write_feed(ctx["legit"].store, seed, per - behind, random.Random(i))  # same prefix
    _write_feed(ctx["legit"].store, bytes([9]) * 32, max(1, min(per // 3, 20)),
                random.Random(9))
    for n in ("server", "legit"):
        RatelessStoreSet(ctx[n].store).refresh()     # as after the homes' first sync
    server_pub = ctx["server"].identity.public
    for c in ctx.values():
        c.close()
    return homes, server_pub


# -- the server process ------------------------------------------------------------------

class Server:
    """`python -m tssb serve` with --stats-every; collects its stats lines."""

    def __init__(self, home, port):
        self.port = port
        self.stats = []          # (monotonic time, dict)
        self.lines = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tssb", "serve", "--home", home, "--port", str(port),
             "--stats-every", "0.5"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
            text=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path[:2])),
            preexec_fn=_child_priority)
        self._ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(30):
            raise RuntimeError("tssb serve did not start: %s" % self.lines[-5:])

    def _read(self):
        # log lines: "<time> INFO    tssb.session: stats {...}" (tssb's log format)
        for line in self.proc.stderr:
            line = line.rstrip("\n")
            _, sep, text = line.partition(" tssb.session: ")
            if sep and text.startswith("stats "):
                self.stats.append((time.monotonic(), json.loads(text[6:])))
            else:
                self.lines.append(line)
            if sep and text.startswith("serving "):
                self._ready.set()

    def rss_mib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
        return 0.0

    def lag_between(self, t0, t1):
        """(worst loop lag, its tick's wait for a CPU, worst stall net of such waits) in ms
        over the server's stats lines for intervals ending in [t0, t1]."""
        lines = [s for t, s in self.stats if t0 <= t <= t1] or [
            dict(loop_lag_max_ms=0.0, loop_lag_runq_ms=0.0, loop_stall_max_ms=0.0)]
        worst = max(lines, key=lambda s: s["loop_lag_max_ms"])
        return (worst["loop_lag_max_ms"], worst["loop_lag_runq_ms"],
                max(s["loop_stall_max_ms"] for s in lines))

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _child_priority():
    """Children (server, sync) run at the caller's priority, not the attacker's."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, _BASE_PRIORITY)
    except OSError:
        pass    # lowering niceness needs privileges: then all run alike


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- attackers ---------------------------------------------------------------------------

class Tally:
    def __init__(self, addr=ATTACKER_ADDR, request=None):
        self.sessions = 0
        self.units = 0           # what the flood sent: frames, elements or IBF buckets
        self.refused = 0         # connections refused (rate limits) and retried
        self.told = {}           # what the server said when it ended a session -> count
        self.addr = addr         # where this attacker connects from
        self.request = request   # crafted flights: the RL_REQUEST to send


async def _session(ctx, port, server_pub, tally, end, retry=True):
    """A new session from the tally's address, retrying while the server's connection rate
    limit refuses us."""
    while time.monotonic() < end:
        writer = None
        try:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, local_addr=(tally.addr, 0))
            keys = await asyncio.wait_for(client_handshake(
                reader, writer, ctx.network_key, ctx.identity.seed, server_pub), 10)
            tally.sessions += 1
            return Session(reader, writer, keys, initiator=True)
        except Exception:
            if writer is not None:
                writer.transport.abort()
            tally.refused += 1
            if not retry:
                return None
            await asyncio.sleep(0.2)
    return None


def _told(tally, session):
    """Count what the server told us when it ended the session (None: nothing)."""
    why = session.refusal
    if why is not None:
        why = re.sub(r"(budget: \w+).*", r"\1", why).split(" (")[0]
        tally.told[why] = tally.told.get(why, 0) + 1


async def open_flood(ctx, port, server_pub, tally, end):
    """OPENs of a service that does not exist, and never a byte read."""
    frame = MX.encode_frame(MX.OPEN, 1, b"no such service")   # refused: the id is reusable
    while time.monotonic() < end:
        s = await _session(ctx, port, server_pub, tally, end)
        if s is None:
            return
        s._tasks[0].cancel()     # stop reading: the server's refusals pile up
        try:
            while time.monotonic() < end:
                for _ in range(256):
                    await s._write_body(frame)
                tally.units += 256
        except Exception:
            pass                 # cut off: reconnect
        s._writer.transport.abort()


async def _setu_full(ch, tally, end):
    await ch.send(M.operation_request(CLAIMED, DEFAULT_APP_ID, M.app_data(C.PROFILE_TSSB2, 0, 160)))
    ours = M.decode(await ch.recv()).set_size
    assert policy.decide_operation_mode(160, CLAIMED, ours, CLAIMED, 0) == policy.FULL_LOCAL_FIRST
    await ch.send(M.full_request(C.MSG_SEND_FULL, 0, ours, CLAIMED))
    rng = random.Random()
    while time.monotonic() < end:
        fake = make_chunk_element(rng.randbytes(32), 1 + rng.randrange(9), rng.randrange(999),
                                  rng.randbytes(120))
        await ch.send(M.full_element(ELEMENT_TYPE, fake))
        tally.units += 1


async def fake_elements(ctx, port, server_pub, tally, end):
    """Full mode from 2**26 declared elements: fake side-chain chunks on two streams."""
    while time.monotonic() < end:
        s = await _session(ctx, port, server_pub, tally, end)
        if s is None:
            return
        try:
            chans = [await s.open_stream("setu") for _ in range(2)]
            await asyncio.gather(*[_setu_full(ch, tally, end) for ch in chans])
        except Exception:
            pass
        s._writer.transport.abort()


def _junk_slices(size, salt, cache={}):
    """A random IBF of `size` buckets as slices (8-bit counters): it never decodes."""
    key = (size, salt)
    if key not in cache:
        per = I.max_buckets_per_message(8, C.IBF_MSG_HEADER)
        rng, out, off = random.Random(size), [], 0
        while off < size:
            n = min(per, size - off)
            out.append(M.ibf_slice(off + n == size, size, off, salt, 8, rng.randbytes(13 * n)))
            off += n
        cache[key] = out
    return cache[key]


async def _setu_ibfs(ch, tally, end):
    await ch.send(M.operation_request(CLAIMED, DEFAULT_APP_ID, M.app_data(C.PROFILE_GNUNET, 0, 160)))
    await ch.recv()              # the strata estimator; we never read another message
    # the largest IBF whose decoding (it and the local one) fits the session's budget
    size, salt = Limits().session["ibf_buckets"] // 2 - 1, 0
    while time.monotonic() < end:
        for msg in _junk_slices(size, salt):
            await ch.send(msg)
        tally.units += size
        size, salt = min(2 * size + 1, C.MAX_IBF_SIZE - 1), salt + 2


async def max_ibf(ctx, port, server_pub, tally, end):
    """An operation request declaring 2**26 elements, then the largest junk IBFs: one
    stream, so that each is decoded and answered by one twice as large (a second stream's
    IBF would exceed the session's budget before any decoding)."""
    while time.monotonic() < end:
        s = await _session(ctx, port, server_pub, tally, end)
        if s is None:
            return
        try:
            await _setu_ibfs(await s.open_stream("setu"), tally, end)
        except Exception:
            pass
        s._writer.transport.abort()


def crafted_request(prefix, n, k1=256, seed=5):
    """An RL_REQUEST from a peer that knows our set (one ordinary sync tells it): our own
    first k1 symbols XOR garbage (every symbol stays nonzero: every key a candidate) and
    our own probe bits (the estimate lands where we search)."""
    r = random.Random(seed)
    garbage = np.array([r.getrandbits(64) | 1 for _ in range(k1)], dtype=np.uint64)
    f = RL.Flight()
    f.add(RL.SEC_SYMBOLS, RL._varint(0) + (prefix.sums[:k1] ^ garbage).astype("<u8").tobytes())
    probes = RL.probe_indices(k1, min(prefix.m, 8 * n + 64))
    f.add(RL.SEC_PROBES, RL._varint(len(probes)) + RL.pack_probes(
        [RL.probe_value(prefix.symbol_int(g)) for g in probes]))
    return RL.request(RL.app_tag(DEFAULT_APP_ID), n, f.messages(RL.FLAG_END)[0])


async def _crafted_stream(s, tally, end):
    while time.monotonic() < end and not s.closed:
        try:
            ch = await s.open_stream("setu")
        except StreamRefused:            # our previous stream's service has not ended yet
            await asyncio.sleep(0.05)
            continue
        try:
            await ch.send(tally.request)
            await ch.recv()              # the answer, after the server's search
            tally.units += 1
        except ChannelClosed:
            pass                         # refused: the next one
        ch.close()


async def _each_session(ctx, port, server_pub, tally, end, body):
    """Sessions one after the other until `end`, each running body(session) until it ends
    (cut off, refused), then counting what the server said."""
    while time.monotonic() < end:
        s = await _session(ctx, port, server_pub, tally, end)
        if s is None:
            return
        try:
            await body(s)
        except Exception:
            pass
        _told(tally, s)
        s._writer.transport.abort()


async def crafted_flights(ctx, port, server_pub, tally, end):
    """Crafted first flights on two setu streams of one session, one after the other."""
    async def body(s):
        await asyncio.gather(*[_crafted_stream(s, tally, end) for _ in range(2)])
    await _each_session(ctx, port, server_pub, tally, end, body)


async def held_sessions(ctx, port, server_pub, tally, end):
    """One key taking every session it can get, each keeping a stream open (a service
    running for it: never idle); refused ones count what the server said."""
    held = []
    while time.monotonic() < end:
        s = await _session(ctx, port, server_pub, tally, end, retry=False)
        if s is None:
            await asyncio.sleep(0.2)
            continue
        try:
            ch = await s.open_stream("clock")
            held.append((s, ch))
            tally.units = len([1 for x, _ in held if not x.closed])
        except Exception:
            _told(tally, s)
            s._writer.transport.abort()
            await asyncio.sleep(0.2)
    for s, _ in held:
        _told(tally, s)
        s._writer.transport.abort()


async def _endless_stream(s, tally, end, honest_first, first):
    while time.monotonic() < end and not s.closed:
        try:
            ch = await s.open_stream("setu")
        except StreamRefused:
            await asyncio.sleep(0.05)
            continue
        try:
            if honest_first:          # a whole first flight: the server answers, then waits
                await ch.send(first)
                await ch.recv()
                junk = _ENDLESS_WANTS
            else:                     # a first flight that never ends
                flags = 9 + _count_len(first)         # FLAGS of the RL_REQUEST
                await ch.send(first[:flags] + b"\x00" + first[flags + 1:])
                junk = _ENDLESS_SYMBOLS
            while time.monotonic() < end and not ch.remote_closed:
                await ch.send(junk)
                tally.units += len(junk)
        except Exception:
            pass                      # refused (flood) or cut off (budget): again
        ch.close()


def _count_len(req):
    """Length of the element count's varint in an RL_REQUEST."""
    n = 0
    while req[9 + n] & 0x80:
        n += 1
    return n + 1


_ENDLESS_SYMBOLS = RL.Flight()
_ENDLESS_SYMBOLS.symbols(21, bytes(8 * 7000))
_ENDLESS_SYMBOLS = _ENDLESS_SYMBOLS.messages(0)[0]
_ENDLESS_WANTS = RL.Flight()
_ENDLESS_WANTS.add(RL.SEC_WANTS, bytes(RL.KEY_LEN * 12000))
_ENDLESS_WANTS = _ENDLESS_WANTS.messages(0)[0]


async def endless_flights(ctx, port, server_pub, tally, end):
    """Two setu streams a session sending RL messages that never END: one a first flight
    (refused past one message), one after a whole first flight (charged, then cut off)."""
    async def body(s):
        await asyncio.gather(_endless_stream(s, tally, end, False, tally.request),
                             _endless_stream(s, tally, end, True, tally.request))
    await _each_session(ctx, port, server_pub, tally, end, body)


async def every_budget(ctx, port, server_pub, tally, end):
    """One session filling two budgets at once: RL messages that never END after a whole
    first flight (received_bytes) on one setu stream, fake full-mode chunks (unverified)
    on the other, until it is cut off; again."""
    async def flights(ch):
        await ch.send(tally.request)
        await ch.recv()
        while time.monotonic() < end:
            await ch.send(_ENDLESS_WANTS)
            tally.units += len(_ENDLESS_WANTS)

    async def body(s):
        chans = [await s.open_stream("setu") for _ in range(2)]
        await asyncio.gather(flights(chans[0]), _setu_full(chans[1], tally, end))
    await _each_session(ctx, port, server_pub, tally, end, body)


FLOODS = {"open flood": open_flood, "fake elements": fake_elements, "maximum IBF": max_ibf,
          "crafted flights": crafted_flights, "one key's sessions": held_sessions,
          "endless flights": endless_flights, "every budget": every_budget}
# issue 34's floods: attackers (sessions) by default, and whether the server is the big one
FLOOD_ATTACKERS = {"crafted flights": 31, "one key's sessions": 1, "endless flights": 32,
                   "every budget": 1}
BIG_SERVER = {"crafted flights"}
ONE_KEY = {"one key's sessions"}


# -- one case ----------------------------------------------------------------------------

async def _sync(home, port):
    t0 = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tssb", "sync", "--peer", "127.0.0.1:%d" % port, "--home", home,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path[:2])),
        preexec_fn=_child_priority)
    out, err = await proc.communicate()
    return proc.returncode, time.monotonic() - t0, (out + err).decode()[-300:]


async def run_case(name, flood, templates, server_pub, args, work):
    case_dir = tempfile.mkdtemp(prefix=re.sub(r"\W+", "_", name) + "-", dir=work)
    homes = {}
    for n, src in templates.items():
        homes[n] = os.path.join(case_dir, n)
        shutil.copytree(src, homes[n])
    port = _free_port()
    legit = Context.open(homes["legit"])
    legit.store.add_peer(server_pub, "server", "127.0.0.1:%d" % port)
    legit.close()
    request = None
    if flood in (crafted_flights, endless_flights, every_budget):
        # the attacker knows the server's set (one ordinary sync tells it)
        store = open_store(homes["server"])
        prefix = RatelessStoreSet(store).prefix
        request = crafted_request(prefix, len(prefix), RL.FIRST_SYMBOLS_MAX
                                  if flood is crafted_flights else RL.FIRST_SYMBOLS)
        if flood is every_budget:       # and R must not decode it: a different set's
            request = crafted_request(prefix, len(prefix) + 500, RL.FIRST_SYMBOLS, seed=9)
        store.close()
    server = Server(homes["server"], port)
    attackers = [Context.open(homes[n]) for n in sorted(homes) if n.startswith("attacker")]
    rss = []
    try:
        await asyncio.sleep(1.0)
        base = server.rss_mib()
        t0 = time.monotonic()
        end = t0 + args.seconds
        count = (args.attackers or FLOOD_ATTACKERS.get(name, 1)) if flood else 0
        keys = 1 if name in ONE_KEY else len(attackers)
        tallies = [Tally("127.0.0.%d" % (2 + i % keys), request) for i in range(count)]
        attacks = [asyncio.ensure_future(flood(attackers[i % keys], port, server_pub, t, end))
                   for i, t in enumerate(tallies)]

        async def sample():
            while time.monotonic() < end:
                rss.append(server.rss_mib())
                await asyncio.sleep(SAMPLE_S)
        sampler = asyncio.ensure_future(sample())
        await asyncio.sleep(args.sync_at)
        code, sync_s, sync_out = await _sync(homes["legit"], port)
        sync_end = time.monotonic()
        await sampler
        # an attacker still waiting (for credit the server no longer grants) is stopped
        _, late = await asyncio.wait(attacks, timeout=10) if attacks else ((), ())
        for a in late:
            a.cancel()
        await asyncio.gather(*attacks, return_exceptions=True)
        await asyncio.sleep(0.6)         # the stats line covering the last interval
        t1 = time.monotonic()
        last = server.stats[-1][1] if server.stats else {}
    finally:
        for c in attackers:
            c.close()
        server.stop()
    growth = max(rss) - base if rss else 0.0
    lag, runq, stall = server.lag_between(t0, t1)
    issue34 = name in FLOOD_ATTACKERS
    per_session = ISSUE34_RSS_PER_SESSION_MIB if issue34 else RSS_BOUND_MIB
    bound = per_session * max(1, len(tallies))
    if issue34:
        bound = min(bound, ISSUE34_RSS_TOTAL_MIB)
    sync_bound = args.seconds if name not in BIG_SERVER else BIG_SYNC_BOUND_S
    told = {}
    for t in tallies:
        for k, v in t.told.items():
            told[k] = told.get(k, 0) + v
    rec = dict(
        case="serve: " + name, seconds=args.seconds, attackers=len(tallies),
        attacker_keys=min(keys, len(tallies)),
        attacker_sessions=sum(t.sessions for t in tallies),
        flood_units=sum(t.units for t in tallies), cut_off=last.get("exceeded", {}),
        attackers_told=told, server_entries=_entries(homes["server"]),
        rss_base_mib=round(base, 1), rss_growth_mib=round(growth, 1), rss_bound_mib=bound,
        rss_growth_per_session_mib=round(growth / max(1, len(tallies)), 1),
        sync_ok=code == 0, sync_s=round(sync_s, 2), sync_bound_s=sync_bound,
        sync_during_attack=bool(flood) and code == 0 and sync_end < end,
        loop_lag_max_ms=round(lag, 1), loop_lag_runq_ms=round(runq, 1),
        loop_stall_max_ms=round(stall, 1), lag_bound_ms=LAG_BOUND_MS,
        ok=code == 0 and growth <= bound and sync_s <= sync_bound
        and (issue34 or lag <= LAG_BOUND_MS) and (not flood or sync_end < end))
    if name in ONE_KEY:
        rec["sessions_held_by_one_key"] = max((t.units for t in tallies), default=0)
    return rec, sync_out


def _entries(home):
    store = open_store(home)
    try:
        return store._one("SELECT COUNT(*) FROM entries")[0]
    finally:
        store.close()


def serve_cases(args):
    """The `tssb serve` floods; one JSON line per case plus the baseline without attack."""
    work = tempfile.mkdtemp(prefix="tssb-bench-hostile-")
    os.setpriority(os.PRIO_PROCESS, 0, _BASE_PRIORITY + ATTACKER_NICE)
    try:
        floods = [n for n in FLOODS if not args.floods or n in args.floods]
        templates, server_pub = build_homes(os.path.join(work, "templates"), args.entries)
        big = None
        if any(n in BIG_SERVER for n in floods):
            _progress("building a server of %d entries" % args.big_entries)
            big = build_homes(os.path.join(work, "big"), args.big_entries, legit_behind=30)

        async def all_cases():
            bases = {}
            for name in floods:
                homes, pub = big if name in BIG_SERVER else (templates, server_pub)
                if id(homes) not in bases:
                    base, out = await run_case("no attack", None, homes, pub, args, work)
                    if not base["sync_ok"]:
                        raise RuntimeError("baseline sync failed: " + out)
                    emit(bench="hostile", **base)
                    bases[id(homes)] = base
                base = bases[id(homes)]
                _progress("flood: %s for %g s" % (name, args.seconds))
                rec, out = await run_case(name, FLOODS[name], homes, pub, args, work)
                rec["sync_ratio"] = round(rec["sync_s"] / base["sync_s"], 2)
                if not rec["sync_ok"]:
                    rec["sync_output"] = out
                emit(bench="hostile", **rec)
        asyncio.run(all_cases())
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -- rateless: the responder's cost of crafted first flights, in this process ------------

class KeySet:
    """A responder's rateless set of n random keys: what its first flight costs depends on
    the keys and its prefix, not on the elements (none are sent back here)."""
    etype = 1
    check = None

    def __init__(self, n, seed=1):
        r = np.random.default_rng(seed)
        raw = r.integers(0, 1 << 40, n, dtype=np.uint64)
        self.keys = set(int(k).to_bytes(RL.KEY_LEN, "little") for k in raw)
        self.prefix = RatelessPrefix(RL.prefix_length(n))
        for k in self.keys:
            self.prefix.add_key(k)
        self.prefix.flush()

    def __len__(self):
        return len(self.keys)

    def rateless(self, m):
        self.prefix.extend(m)
        return self.prefix

    def has_rateless_key(self, k):
        return k in self.keys

    def rateless_elements(self, k):
        return []

    def has(self, h):
        return False

    def add(self, data, h=None):
        pass


def _operation(fn):
    """(result, CPU seconds, traced peak growth in MiB, RSS growth in MiB) of fn()."""
    gc.collect()
    rss0 = _own_rss_mib()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    c0 = time.process_time()
    try:
        out = fn()
        cpu = time.process_time() - c0
        peak = (tracemalloc.get_traced_memory()[1] - base) / 2 ** 20
    finally:
        tracemalloc.stop()
    return out, cpu, peak, _own_rss_mib() - rss0


def _own_rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def rateless_cases(args):
    """Issue 34 item 1: crafted first flights against a responder of --rl-elements keys."""
    from tssb.session.budget import Pool
    n = args.rl_elements
    t0 = time.perf_counter()
    s = KeySet(n)
    _progress("responder of %d keys built in %.1f s" % (n, time.perf_counter() - t0))

    def one(case, req, budget=None, more=None, cfg=None):
        b = Reconciler(s, False, cfg or Config())
        b.budget = budget
        try:
            out, cpu, peak, rss = _operation(lambda: b.receive(req))
        except RL.SetuError as e:       # refused: what it cost us to say so
            out, cpu, peak, rss = _operation(lambda: _refused(s, req, cfg))
            emit(bench="hostile", case="rateless: " + case, elements=n,
                 request_bytes=len(req), refused=e.reason, cpu_s=round(cpu, 3),
                 peak_growth_mib=round(peak, 1), ok=cpu <= RL_CPU_BOUND_S)
            return
        rec = dict(bench="hostile", case="rateless: " + case, elements=n,
                   request_bytes=len(req), cpu_s=round(cpu, 3), peak_growth_mib=round(peak, 1),
                   rss_growth_mib=round(rss, 1), search_tests=b.stats["search_tests"],
                   search_limited=b.stats["search_limited"], estimate=b.stats["estimate"],
                   answer=b.stats["fallback"] or "symbols %d" % b.stats["symbols_sent"],
                   answer_bytes=sum(len(m) for m in out),
                   cpu_bound_s=RL_CPU_BOUND_S, peak_bound_mib=RL_PEAK_BOUND_MIB,
                   ok=cpu <= RL_CPU_BOUND_S and peak <= RL_PEAK_BOUND_MIB)
        if more is not None:        # then a MORE up to the most symbols we stream
            f = RL.Flight()
            m2 = b._rl._limits()[0]
            f.add(RL.SEC_MORE, RL._varint(m2))
            out, cpu, peak, rss = _operation(lambda: b.receive(f.messages(RL.FLAG_END)[0]))
            rec.update(case="rateless: " + more, more_to=m2, cpu_s=round(cpu, 3),
                       peak_growth_mib=round(peak, 1), rss_growth_mib=round(rss, 1),
                       answer_bytes=sum(len(m) for m in out),
                       ok=cpu <= RL_CPU_BOUND_S and peak <= RL_PEAK_BOUND_MIB)
        emit(**rec)

    state = s.prefix.to_bytes()
    _, load_cpu, load_peak, _ = _operation(lambda: RatelessPrefix.from_bytes(state))
    emit(bench="hostile", case="rateless: the responder's kept state", elements=n,
         prefix=s.prefix.m, symbols_computed=len(s.prefix.sums), state_bytes=len(state),
         state_bytes_per_element=round(len(state) / n, 1), load_cpu_s=round(load_cpu, 3),
         load_peak_mib=round(load_peak, 1))

    for k1 in (21, RL.FIRST_SYMBOLS_MAX, 256):
        one("crafted first flight, %d symbols" % k1, crafted_request(s.prefix, n, k1))
    # a responder configured to accept 256 symbols (beyond the masks: the search walks
    # every key's mapping, until its CPU time is spent)
    one("crafted first flight, 256 symbols, rl_first_symbols_max=256",
        crafted_request(s.prefix, n, 256), cfg=Config(rl_first_symbols_max=256))
    far = RL.Flight()          # probes that all disagree: a difference as large as both sets
    r = random.Random(7)
    far.add(RL.SEC_SYMBOLS, RL._varint(0) + r.randbytes(8 * 21))
    probes = RL.probe_indices(21, min(s.prefix.m, 8 * n + 64))
    far.add(RL.SEC_PROBES, RL._varint(len(probes)) + RL.pack_probes(
        [1 - RL.probe_value(s.prefix.symbol_int(g)) for g in probes]))
    one("probes claiming a huge difference",
        RL.request(RL.app_tag(DEFAULT_APP_ID), n, far.messages(RL.FLAG_END)[0]))
    one("crafted first flight, 21 symbols", crafted_request(s.prefix, n, 21),
        more="MORE up to the symbol limit after a first flight")
    pool = Pool()
    budget = pool.budget(b"\x0a" * 32)
    for i in range(4):          # one key's crafted flights, again and again
        one("crafted first flight, 256 symbols, rl_first_symbols_max=256, the same key's %s"
            % ("1st", "2nd", "3rd", "4th")[i], crafted_request(s.prefix, n, 256), budget,
            cfg=Config(rl_first_symbols_max=256))


def _refused(s, req, cfg):
    try:
        Reconciler(s, False, cfg or Config()).receive(req)
    except RL.SetuError:
        pass


CASES = {"mesh": mesh_cases, "serve": serve_cases, "rateless": rateless_cases}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", choices=sorted(CASES), help="run one group of cases")
    p.add_argument("--junk", type=int, default=10000, help="mesh: junk packets per case (10000)")
    p.add_argument("--seconds", type=float, default=25.0, help="length of each flood (25)")
    p.add_argument("--attackers", type=int, default=0,
                   help="attacking sessions at once (default: 1, issue 34's floods %s)"
                        % ", ".join("%s %d" % kv for kv in FLOOD_ATTACKERS.items()))
    p.add_argument("--sync-at", type=float, default=5.0,
                   help="seconds into the flood the legitimate sync starts (5)")
    p.add_argument("--entries", type=int, default=300,
                   help="entries on the server (3 feeds; a third side-chained) (300)")
    p.add_argument("--big-entries", type=int, default=100000,
                   help="entries on the server of the crafted-flights case (100000)")
    p.add_argument("--rl-elements", type=int, default=10 ** 6,
                   help="rateless: keys of the responder (1000000)")
    p.add_argument("--floods", type=lambda s: s.split(","), default=None,
                   help="comma-separated subset of: " + ", ".join(FLOODS))
    args = p.parse_args(argv)
    for name, fn in CASES.items():
        if args.only in (None, name):
            fn(args)


if __name__ == "__main__":
    main()
