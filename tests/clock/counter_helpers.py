"""Builders for elapsed-time counter tests: a counter with participants (fixed seeds, no
randomness), valid and invalid increments of each kind, repos holding them."""
import hashlib

from tssb.clock import counter as C
from tssb.clock import crypto
from tssb.clock import events as E
from tssb.clock.repo import ThreadRepo

T = 1000        # minimum delay between increments (ms)
LINKS = 4
T0 = 1_000_000  # timestamps in 1970: never "in the future" for the verifier's clock


def seeds(n):
    return [hashlib.sha256(b"p%d" % i).digest() for i in range(n)]


SEEDS = seeds(12)
PUBS = [crypto.publickey(s) for s in SEEDS]


class World:
    """Initiate + a Participate per seed; `st` is the reference state used to build
    increments (every message appended to `msgs` is ingested into it)."""

    def __init__(self, max_range=50, ratio=2):
        params = C.Params(64, 2, max_range, T, ratio, LINKS)
        # An Initiate whose hash is divisible by R would designate everybody; pick one for
        # which SELECT really selects.
        for i in range(64):
            init = C.initiate(hashlib.sha256(b"init%d" % i).digest(), params, T0)
            if int.from_bytes(hashlib.sha256(init.raw).digest(), "big") % ratio:
                break
        self.init = init
        self.root = init.eid
        self.st = C.CounterState(init)
        self.msgs = [init]
        for i, s in enumerate(SEEDS):
            self.add(C.participate(s, init.eid, [init.eid], T0 + 1 + i))

    def add(self, ev):
        self.st.ingest(ev, None)
        self.msgs.append(ev)
        return ev

    def chosen(self, ref, want=True, exclude=()):
        """A participant SELECT does (want=True) or does not designate after `ref`."""
        h = self.st.hashes[ref]
        for s in SEEDS:
            if s not in exclude and C.select(h, crypto.publickey(s), self.st.params.ratio) == want:
                return s
        raise AssertionError("no such participant for this fixed data")

    def increment(self, ref, seed=None, ts=None):
        """A valid increment on `ref` by a designated participant (not yet added)."""
        seed = seed or self.chosen(ref)
        prev = self.st.msgs[ref].ts
        ts = ts or prev + T + 10
        return C.make_increment(seed, self.st, [ref], chain(prev + 1), ts)


def chain(start):
    return [start + i * (T // LINKS) for i in range(LINKS)]


OUTSIDER = hashlib.sha256(b"outsider").digest()


def invalid(kind):
    """(world, event): an increment on the Initiate that breaks one rule, `kind` being
    the CounterError reason the verifier must give."""
    w = World(max_range=0 if kind == "range" else 50)
    ref = w.root
    if kind == "not_selected":
        return w, C.make_increment(w.chosen(ref, want=False), w.st, [ref], chain(T0 + 1), T0 + T + 5)
    if kind == "too_early":
        return w, C.make_increment(w.chosen(ref), w.st, [ref], chain(T0 + 1), T0 + T - 1)
    if kind == "bad_chain":   # gaps shorter than T / links
        return w, C.make_increment(w.chosen(ref), w.st, [ref], [T0 + 1, T0 + 2, T0 + 3, T0 + 4],
                                   T0 + T + 5)
    if kind == "range":
        return w, C.make_increment(w.chosen(ref), w.st, [ref], chain(T0 + 1), T0 + T + 5)
    if kind == "bad_stamp":   # one cell too many, re-signed by its author
        s = w.chosen(ref)
        ev = C.make_increment(s, w.st, [ref], chain(T0 + 1), T0 + T + 5)
        good = w.st.expected_stamp([ref], crypto.publickey(s))
        bad = good.merge(good)
        bad.cells[0] += 1
        body = bytes([C.T_INCR]) + bad.encode() + ev.body[1 + len(good.encode()):]
        return w, E.make_signed_event(s, ref, ev.prevs, ev.ts, body)
    if kind == "not_participant":   # selected, but never joined
        h = w.st.hashes[ref]
        for i in range(64):
            s = hashlib.sha256(b"outsider%d" % i).digest()
            if C.select(h, crypto.publickey(s), w.st.params.ratio):
                return w, C.make_increment(s, w.st, [ref], chain(T0 + 1), T0 + T + 5)
    raise ValueError(kind)


KINDS = ["not_selected", "too_early", "bad_chain", "bad_stamp", "range", "not_participant"]


class RawRepo(ThreadRepo):
    """An offender's (or a pre-verification) peer: stores counter messages unverified."""

    def _counter(self, key, fresh=False):
        return None
