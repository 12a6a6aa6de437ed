"""Consensus on elapsed time (spec: "Protocol for establishing a consensus on elapsed
time"): a global counter that is a Bloom clock whose ROF hashes the incrementer's feed ID;
its reading is the largest cell.

Messages are signed events (events.py) of one thread whose root is the Initiate message;
their back references (the spec's "branch" field) name the increments the author knew.
Body layouts (first byte is the type):

  INITIATE 'I': varint n, k, max_range, delay_ms (T), ratio (R), links (hash-chain length)
  PARTICIPATE 'P': active(1 byte: 1 join, 0 leave)
  INCREMENT 'C': stamp (Bloom clock encoding), varint links, ts_1..ts_links (varints),
                 final hash(32)

Hash chain (proof of delay): h_0 = SHA256("tssb-clock-chain" || author || refs in order),
h_i = SHA256(h_{i-1} || ts_i as 8 bytes big endian); the increment carries the ts_i and
h_links, and the whole event is signed, so the signature covers the final hash.

Verification (spec Rules 1 and 2), reasons as CounterError.reason:
  blocked        the author was blocked before
  not_participant  no active Participate from the author
  not_selected   SELECT(ref, author) is not 0 for any referenced increment whose author
                 is in the incrementer's first circle (the Initiate counts as selecting all)
  bad_stamp      stamp != join of the referenced stamps + ROF(author)
  range          largest minus smallest cell exceeds max_range
  too_early      ts < max(ts of refs) + T, or ts < ts(Initiate) + value * T
  future         ts later than the verifier's clock (+ MAX_SKEW_MS)
  bad_chain      wrong length, timestamps not increasing, a gap below T / links, ending
                 after the message, starting before the refs, or a wrong final hash
Every failure blocks the author definitively; a message referring to events we do not
have yet raises ClockError("unknown_ref") without blocking (it may arrive later).
"""
import hashlib

from tssb.clock import events as E
from tssb.clock.bloom import MAX_CELL, BloomClock, check_params, rof
from tssb.clock.errors import ClockError, CounterError
from tssb.clock.wire import Reader, varint

T_INIT, T_PART, T_INCR = ord("I"), ord("P"), ord("C")
CHAIN_TAG = b"tssb-clock-chain"
MAX_LINKS = 256           # hash-chain links one increment may carry (bounds verify work)
MAX_SKEW_MS = 60 * 1000   # tolerance for a verifier's clock running behind the author's
MAX_RATIO = 1 << 16


class Params:
    def __init__(self, n, k, max_range, delay_ms, ratio, links):
        check_params(n, k)
        if not (1 <= ratio <= MAX_RATIO) or not (1 <= links <= MAX_LINKS) or delay_ms < 0 \
                or not (0 <= max_range <= MAX_CELL):
            raise ClockError("counter_params")
        self.n, self.k, self.max_range = n, k, max_range
        self.delay_ms, self.ratio, self.links = delay_ms, ratio, links

    def encode(self):
        return bytes([T_INIT]) + b"".join(varint(x) for x in (
            self.n, self.k, self.max_range, self.delay_ms, self.ratio, self.links))

    @classmethod
    def decode(cls, body):
        r = Reader(body)
        if r.byte("type") != T_INIT:
            raise ClockError("not_initiate")
        vals = [r.uint("param", MAX_CELL) for _ in range(6)]
        r.end()
        return cls(*vals)


def select(msg_hash, fid, ratio):
    """The spec's SELECT: (message hash * feed ID) mod R == 0, both as 256-bit integers.

    Args:
        msg_hash: 32-byte SHA-256 of the increment (or Initiate) message.
        fid: 32-byte feed ID of a follower.
        ratio: R.
    Returns:
        True when the follower is designated as a next incrementer.
    """
    return (int.from_bytes(msg_hash, "big") * int.from_bytes(fid, "big")) % ratio == 0


def chain_start(author, refs):
    return hashlib.sha256(CHAIN_TAG + author + b"".join(refs)).digest()


def chain_hash(start, stamps):
    h = start
    for ts in stamps:
        h = hashlib.sha256(h + ts.to_bytes(8, "big")).digest()
    return h


def initiate(seed, params, ts_ms):
    """The Initiate event (root of the counter thread)."""
    return E.make_signed_event(seed, E.ZERO_ROOT, (), ts_ms, params.encode())


def participate(seed, root, refs, ts_ms, active=True):
    """A Participate (or, active=False, a leave) event."""
    return E.make_signed_event(seed, root, tuple(refs), ts_ms, bytes([T_PART, 1 if active else 0]))


def make_increment(seed, state, refs, link_ts, ts_ms):
    """Build an Increment event on top of the referenced increments.

    Args:
        seed: incrementer's seed.
        state: CounterState holding the references.
        refs: ids of increments (or the Initiate) being joined.
        link_ts: the hash-chain timestamps the incrementer produced while waiting.
        ts_ms: the message timestamp.
    Returns:
        Event (not yet ingested).
    """
    from tssb.clock import crypto
    author = crypto.publickey(seed)
    stamp = state.expected_stamp(refs, author)
    final = chain_hash(chain_start(author, refs), link_ts)
    body = bytes([T_INCR]) + stamp.encode() + varint(len(link_ts)) + \
        b"".join(varint(t) for t in link_ts) + final
    return E.make_signed_event(seed, state.root, tuple(refs), ts_ms, body)


class CounterState:
    """A participant's view of one counter: verifies and records its messages.

    Args:
        init_event: the Initiate event (validated signed event).
        follows: callable (a, b) -> True when feed a has feed b in its first circle;
            None means every participant is in every other's first circle.
    """

    def __init__(self, init_event, follows=None):
        if not init_event.is_root:
            raise ClockError("not_initiate")
        self.params = Params.decode(init_event.body)
        self.init = init_event
        self.root = init_event.eid
        self.follows = follows or (lambda a, b: True)
        p = self.params
        self.msgs = {self.root: init_event}
        self.hashes = {self.root: hashlib.sha256(init_event.raw).digest()}
        self.stamps = {self.root: BloomClock(p.n, p.k)}
        self.increments = set()
        self.participants = {}
        self.blocked = {}

    def expected_stamp(self, refs, author):
        """Join of the referenced stamps plus the author's ROF cells (spec Rule 2)."""
        c = BloomClock(self.params.n, self.params.k)
        for ref in refs:
            if ref not in self.stamps:
                raise ClockError("unknown_ref")
            c = c.merge(self.stamps[ref])
        for i in rof(author, c.n, c.k):
            c.cells[i] += 1
        return c

    def value(self):
        """The counter: the largest cell over all valid increments."""
        top = 0
        for e in self.increments:
            top = max(top, self.stamps[e].value())
        return top

    def top(self):
        """Valid increment ids with the highest reading (the frontier)."""
        v = self.value()
        return sorted(e for e in self.increments if self.stamps[e].value() == v)

    def designated(self, eid):
        """Participants SELECT designates after message eid (its next incrementers)."""
        h = self.hashes[eid]
        author = self.msgs[eid].author
        return sorted(a for a, on in self.participants.items() if on and a not in self.blocked
                      and select(h, a, self.params.ratio)
                      and (eid == self.root or self.follows(a, author)))

    def min_next_ts(self):
        """Earliest timestamp of the next increment on top of the frontier."""
        tops = self.top() or [self.root]
        return max(self.msgs[e].ts for e in tops) + self.params.delay_ms

    def held(self, author, ts):
        """Temporary block (Rule 2): a designated next incrementer's messages timestamped
        after the earliest next-increment time are held back until its increment is seen."""
        tops = self.top() or [self.root]
        if not any(author in self.designated(e) for e in tops):
            return False
        return ts > self.min_next_ts()

    def _block(self, ev, reason):
        self.blocked[ev.author] = reason
        raise CounterError(reason, ev.author.hex()[:16])

    def ingest(self, ev, now_ms):
        """Verify and record one counter message.

        Returns:
            "participate", "increment" or "known".
        Raises:
            CounterError: a rule is broken (the author is now blocked).
            ClockError: "unknown_ref" (missing references), "thread" (other counter),
                malformed body.
        """
        if ev.eid in self.msgs:
            return "known"
        if ev.key != self.root:
            raise ClockError("thread")
        if ev.author in self.blocked:
            raise CounterError("blocked", ev.author.hex()[:16])
        for ref in ev.prevs:
            if ref not in self.msgs:
                raise ClockError("unknown_ref")
        if not ev.body:
            raise ClockError("body")
        t = ev.body[0]
        if t == T_PART:
            if len(ev.body) != 2 or ev.body[1] not in (0, 1):
                raise ClockError("body")
            self.participants[ev.author] = ev.body[1] == 1
            self._record(ev)
            return "participate"
        if t != T_INCR:
            raise ClockError("body")
        stamp = self._verify_increment(ev, now_ms)
        self._record(ev)
        self.stamps[ev.eid] = stamp
        self.increments.add(ev.eid)
        return "increment"

    def _record(self, ev):
        self.msgs[ev.eid] = ev
        self.hashes[ev.eid] = hashlib.sha256(ev.raw).digest()

    def _verify_increment(self, ev, now_ms):
        p = self.params
        r = Reader(ev.body[1:])
        try:
            stamp = BloomClock.read(r, p.k, p.n)
            nlinks = r.uint("links", MAX_LINKS)
            link_ts = [r.uint("link ts", (1 << 63) - 1) for _ in range(nlinks)]
            final = r.take(32, "final")
            r.end()
        except ClockError:
            self._block(ev, "malformed")
        refs = ev.prevs
        if not self.participants.get(ev.author):
            self._block(ev, "not_participant")
        if not refs or any(x != self.root and x not in self.increments for x in refs):
            self._block(ev, "bad_refs")
        if not any(select(self.hashes[x], ev.author, p.ratio) and
                   (x == self.root or self.follows(ev.author, self.msgs[x].author)) for x in refs):
            self._block(ev, "not_selected")
        expected = self.expected_stamp(refs, ev.author)
        if stamp != expected:
            self._block(ev, "bad_stamp")
        if stamp.spread() > p.max_range:
            self._block(ev, "range")
        prev_ts = max(self.msgs[x].ts for x in refs)
        if ev.ts < prev_ts + p.delay_ms or ev.ts < self.init.ts + stamp.value() * p.delay_ms:
            self._block(ev, "too_early")
        if ev.ts > now_ms + MAX_SKEW_MS:
            self._block(ev, "future")
        gap = p.delay_ms // p.links
        ok = nlinks == p.links and link_ts[0] >= prev_ts and link_ts[-1] <= ev.ts
        for a, b in zip(link_ts, link_ts[1:]):
            ok = ok and b > a and b - a >= gap
        if not ok or chain_hash(chain_start(ev.author, refs), link_ts) != final:
            self._block(ev, "bad_chain")
        return stamp
