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

Participation is read by timestamp, not arrival order: an author is a participant at time
t when its latest Participate (by ts, then id) with ts <= t is a join. So every verifier
reaches the same verdict whatever order the messages came in.

Verification (spec Rules 1 and 2), reasons as CounterError.reason (RULES names the rule):
  blocked        the author was blocked before
  malformed      the increment body does not decode
  not_participant  no join from the author at or before the increment's timestamp
  bad_refs       a reference is neither the Initiate nor an increment
  not_selected   SELECT(ref, author) is not 0 for any referenced increment whose author
                 is in the incrementer's first circle (the Initiate counts as selecting all)
  bad_stamp      stamp != join of the referenced stamps + ROF(author)
  range          largest minus smallest cell exceeds max_range
  too_early      ts < max(ts of refs) + T, or ts < ts(Initiate) + value * T
  future         ts later than the verifier's clock (+ MAX_SKEW_MS)
  bad_chain      wrong length, timestamps not increasing, a gap below T / links, ending
                 after the message, starting before the refs, or a wrong final hash
Every failure blocks the author definitively (the repo persists it); a message referring
to events we do not have yet raises ClockError("unknown_ref") without blocking (it may
arrive later), and so does, with ingest(final=False), an increment whose author's join
has not arrived ("unknown_participant": joins are not back references).

Temporary block (Rule 2: "When a peer sees an 'increment' message, it must temporarily
block the propagation of messages from the designated incrementer ... with a larger
timestamp than the minimum timestamp of the next increment"). Our reading:
  * the designated incrementers are the participants SELECT designates after a frontier
    increment (top(); the Initiate while there is none), participation read at the
    minimum next timestamp min_next_ts() = max ts of the frontier + T;
  * their messages with ts > min_next_ts() are held: verified and counted by us, but not
    propagated (the repo keeps them out of the synced thread DAG);
  * increments are never held: they are checked by Rule 1 already, and the designated
    increment is exactly what must travel (it also ends the hold);
  * the hold is re-evaluated whenever the state changes: it ends when the frontier moves
    (the designated increment, or another incrementer's) so that the author is no longer
    designated or its message is no longer later than the new minimum next timestamp.
Because it is a function of the known increments and of joins older than the held
messages, two peers knowing the same messages hold the same ones, so digests converge.
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

# The rule behind each CounterError reason (for messages to users).
RULES = {
    "blocked": "Rule 2: the author is blocked definitively",
    "malformed": "increment format",
    "not_participant": "Rule 1: only committed participants increment",
    "bad_refs": "branch field: increments (or the Initiate) only",
    "not_selected": "Rule 1: SELECT designates the next incrementers",
    "bad_stamp": "Rule 2: stamp = join of the referenced stamps + the incrementer",
    "range": "Rule 1: maximum range of the Bloom clock",
    "too_early": "Rule 1/2: minimum delay T between increments",
    "future": "no timestamps in the future",
    "bad_chain": "proof of delay (hash chain)",
}


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
        self.parts = {}          # author -> sorted [(ts, eid, active)] of its Participates
        self.blocked = {}        # author -> reason

    @property
    def participants(self):
        """author -> True when its latest Participate is a join."""
        return {a: lst[-1][2] for a, lst in self.parts.items()}

    def participant_at(self, author, ts=None):
        """True when the author's latest Participate with timestamp <= ts (any when ts
        is None) is a join."""
        on = False
        for t, _, active in self.parts.get(author, ()):
            if ts is not None and t > ts:
                break
            on = active
        return on

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

    def designated(self, eid, at=None):
        """Participants SELECT designates after message eid (its next incrementers).

        Args:
            eid: an increment (or the Initiate).
            at: read participation at this timestamp (None: the latest).
        """
        h = self.hashes[eid]
        author = self.msgs[eid].author
        return sorted(a for a in self.parts if a not in self.blocked
                      and self.participant_at(a, at) and select(h, a, self.params.ratio)
                      and (eid == self.root or self.follows(a, author)))

    def min_next_ts(self):
        """Earliest timestamp of the next increment on top of the frontier."""
        tops = self.top() or [self.root]
        return max(self.msgs[e].ts for e in tops) + self.params.delay_ms

    def held(self, author, ts):
        """Temporary block (Rule 2, see the module docstring): True when the author is a
        designated next incrementer and ts is later than the earliest next-increment time."""
        limit = self.min_next_ts()
        if ts <= limit:
            return False
        return any(author in self.designated(e, limit) for e in (self.top() or [self.root]))

    def holds(self, ev):
        """True when the temporary block keeps message ev from being propagated
        (increments and the Initiate never are)."""
        if ev.is_root or ev.body[:1] == bytes([T_INCR]):
            return False
        return self.held(ev.author, ev.ts)

    def plan(self, author, now_ms):
        """What an increment by `author` needs (checked before waiting for the delay).

        Returns:
            (refs, earliest): the frontier increments that designate the author and the
            earliest timestamp the increment may carry.
        Raises:
            CounterError: a rule forbids it whatever the wait ("blocked",
                "not_participant", "not_selected", "range"); `.detail` says when it could
                change.
        """
        if author in self.blocked:
            raise CounterError("blocked", self.blocked[author])
        if not self.participant_at(author, now_ms):
            raise CounterError("not_participant", "join first")
        tops = self.top() or [self.root]
        refs = [e for e in tops if author in self.designated(e)]
        if not refs:
            raise CounterError("not_selected", "not designated after the frontier; wait for "
                                               "the next increment")
        if self.expected_stamp(refs, author).spread() > self.params.max_range:
            raise CounterError("range", "your cells are ahead; wait for other incrementers")
        stamp = self.expected_stamp(refs, author)
        earliest = max(max(self.msgs[r].ts for r in refs) + self.params.delay_ms,
                       self.init.ts + stamp.value() * self.params.delay_ms)
        return refs, earliest

    def check(self, ev, now_ms, final=True):
        """Verify one message without recording it or blocking anybody.

        Returns:
            "participate", "increment" or "known".
        Raises:
            as ingest(), but nothing is recorded.
        """
        return self._check(ev, now_ms, final)[0]

    def ingest(self, ev, now_ms, final=True):
        """Verify and record one counter message.

        Args:
            ev: a validated signed event of this counter.
            now_ms: the verifier's clock (None: skip the "future" rule, for messages
                accepted before).
            final: False while more messages may still arrive: an increment whose
                author's join is missing then waits ("unknown_participant") instead of
                being rejected.
        Returns:
            "participate", "increment" or "known".
        Raises:
            CounterError: a rule is broken (the author is now blocked, except for
                "blocked" itself).
            ClockError: "unknown_ref" (missing references), "unknown_participant",
                "thread" (other counter), malformed Participate body.
        """
        try:
            kind, stamp = self._check(ev, now_ms, final)
        except CounterError as e:
            if e.reason != "blocked":
                self.blocked[ev.author] = e.reason
            raise
        if kind == "known":
            return kind
        self.msgs[ev.eid] = ev
        self.hashes[ev.eid] = hashlib.sha256(ev.raw).digest()
        if kind == "participate":
            lst = self.parts.setdefault(ev.author, [])
            lst.append((ev.ts, ev.eid, ev.body[1] == 1))
            lst.sort()
        else:
            self.stamps[ev.eid] = stamp
            self.increments.add(ev.eid)
        return kind

    def _check(self, ev, now_ms, final):
        if ev.eid in self.msgs:
            return "known", None
        if ev.key != self.root:
            raise ClockError("thread")
        if ev.author in self.blocked:
            raise _fail(ev, "blocked")
        for ref in ev.prevs:
            if ref not in self.msgs:
                raise ClockError("unknown_ref")
        if not ev.body:
            raise ClockError("body")
        t = ev.body[0]
        if t == T_PART:
            if len(ev.body) != 2 or ev.body[1] not in (0, 1):
                raise ClockError("body")
            return "participate", None
        if t != T_INCR:
            raise ClockError("body")
        return "increment", self._verify_increment(ev, now_ms, final)

    def _verify_increment(self, ev, now_ms, final):
        p = self.params
        r = Reader(ev.body[1:])
        try:
            stamp = BloomClock.read(r, p.k, p.n)
            nlinks = r.uint("links", MAX_LINKS)
            link_ts = [r.uint("link ts", (1 << 63) - 1) for _ in range(nlinks)]
            final_hash = r.take(32, "final")
            r.end()
        except ClockError:
            raise _fail(ev, "malformed")
        refs = ev.prevs
        if not self.participant_at(ev.author, ev.ts):
            if not final:
                raise ClockError("unknown_participant", ev.author.hex()[:16])
            raise _fail(ev, "not_participant")
        if not refs or any(x != self.root and x not in self.increments for x in refs):
            raise _fail(ev, "bad_refs")
        if not any(select(self.hashes[x], ev.author, p.ratio) and
                   (x == self.root or self.follows(ev.author, self.msgs[x].author)) for x in refs):
            raise _fail(ev, "not_selected")
        expected = self.expected_stamp(refs, ev.author)
        if stamp != expected:
            raise _fail(ev, "bad_stamp")
        if stamp.spread() > p.max_range:
            raise _fail(ev, "range")
        prev_ts = max(self.msgs[x].ts for x in refs)
        if ev.ts < prev_ts + p.delay_ms or ev.ts < self.init.ts + stamp.value() * p.delay_ms:
            raise _fail(ev, "too_early")
        if now_ms is not None and ev.ts > now_ms + MAX_SKEW_MS:
            raise _fail(ev, "future")
        gap = p.delay_ms // p.links
        ok = nlinks == p.links and link_ts[0] >= prev_ts and link_ts[-1] <= ev.ts
        for a, b in zip(link_ts, link_ts[1:]):
            ok = ok and b > a and b - a >= gap
        if not ok or chain_hash(chain_start(ev.author, refs), link_ts) != final_hash:
            raise _fail(ev, "bad_chain")
        return stamp


def _fail(ev, reason):
    """A CounterError naming the offending author and event."""
    e = CounterError(reason, ev.author.hex()[:16])
    e.author, e.eid = ev.author, ev.eid
    return e
