"""Fork resolution for feeds (spec: "Protocol to resolve collaboratively a fork in a feed
and inform the owner of the feed").

* A fork proof is two validly signed entries of one feed at the same sequence number with
  different MIDs: only the feed's key can have produced both, so it convicts the owner.
  Wire form: the two feed events (176 bytes each, events.py), smaller MID first.
* A join event records the result of the default join strategy: signed by the agent
  that resolved the fork, it names the feed, the tips of all branches in join order, the
  Version Digest of the joined feed, and carries the fork proofs. The spec leaves open
  what such a message contains (its "Open issues"); this is our answer, see docs/clock.md.

  JOIN = "JOIN" || RESOLVER(32) || FID(32) || DIGEST(32) || ts varint
         || varint(#tips) || TIP*20 || varint(#proofs) || PROOF*352 || SIG(64)
"""
import hashlib

from tssb.clock import crypto
from tssb.clock import events as E
from tssb.clock.errors import ClockError
from tssb.clock.wire import Reader, varint

PROOF_LEN = 2 * E.FEED_EVENT_LEN
JOIN_TAG = b"JOIN"
# A join naming more branches than this is refused; real feeds fork once or twice.
MAX_TIPS = 64
MAX_PROOFS = 16
# Largest well-formed join: 4 + 3*32 + 10 + 1 + 64*20 + 1 + 16*352 + 64 = 7088 bytes.
MAX_JOIN_BYTES = 8192
JOIN_ID_LEN = 20             # join_id(): SHA-256 prefix, as long as an event id


def make_proof(raw_a, raw_b):
    """Fork proof from two feed events (validates them).

    Raises:
        ClockError: "not_a_fork" unless same feed, same seq, different MIDs.
    """
    a = E.parse_feed_event(raw_a)
    b = E.parse_feed_event(raw_b)
    if a.key != b.key or a.seq != b.seq or a.eid == b.eid:
        raise ClockError("not_a_fork")
    if b.eid < a.eid:
        a, b = b, a
    return a.raw + b.raw


def verify_proof(proof):
    """Check a fork proof.

    Returns:
        (fid, seq) of the fork.
    Raises:
        ClockError: "proof_len", "not_a_fork" or an event validation reason.
    """
    if len(proof) != PROOF_LEN:
        raise ClockError("proof_len", len(proof))
    a = E.parse_feed_event(proof[:E.FEED_EVENT_LEN])
    b = E.parse_feed_event(proof[E.FEED_EVENT_LEN:])
    if a.key != b.key or a.seq != b.seq or a.eid == b.eid:
        raise ClockError("not_a_fork")
    return a.key, a.seq


def find_forks(dag):
    """Fork proofs for every seq of a feed DAG that holds more than one entry."""
    by_seq = {}
    for ev in dag.events.values():
        by_seq.setdefault(ev.seq, []).append(ev)
    out = []
    for seq in sorted(by_seq):
        evs = sorted(by_seq[seq], key=lambda e: e.eid)
        if len(evs) > 1:
            out.append(make_proof(evs[0].raw, evs[1].raw))
    return out


def tips_in_join_order(dag):
    """Tips of the branches in the order the join strategy lists them."""
    tips = set(dag.tips())
    return [e for e in dag.order() if e in tips]


class Join:
    """A verified join event."""

    def __init__(self, resolver, fid, digest, ts, tips, proofs, raw):
        self.resolver = resolver
        self.fid = fid
        self.digest = digest
        self.ts = ts
        self.tips = tips
        self.proofs = proofs
        self.raw = raw


def make_join(seed, dag, ts_ms):
    """Resolve the forks of a feed DAG: a signed join event with its fork proofs.

    Args:
        seed: the resolver's 32-byte seed.
        dag: EventDAG of the feed (with forks).
        ts_ms: timestamp.
    Returns:
        bytes (the join event).
    Raises:
        ClockError: "no_fork" when the feed has no fork.
    """
    proofs = find_forks(dag)[:MAX_PROOFS]
    if not proofs:
        raise ClockError("no_fork")
    tips = tips_in_join_order(dag)[:MAX_TIPS]
    b = bytearray(JOIN_TAG + crypto.publickey(seed) + dag.key + dag.digest() + varint(ts_ms))
    b += varint(len(tips)) + b"".join(tips)
    b += varint(len(proofs)) + b"".join(proofs)
    return bytes(b) + crypto.sign(seed, bytes(b))


def join_id(raw):
    """Short id of a join event (what peers list to say which joins they hold)."""
    return hashlib.sha256(bytes(raw)).digest()[:JOIN_ID_LEN]


def parse_join(raw):
    """Validate a join event's form, signature and proofs.

    Returns:
        Join.
    Raises:
        ClockError: malformed ("too_large", "short", "trailing", ...), "signature",
            "no_fork", or a proof of another feed ("proof_feed").
    """
    if len(raw) > MAX_JOIN_BYTES:
        raise ClockError("too_large", len(raw))
    r = Reader(raw)
    if r.take(4, "tag") != JOIN_TAG:
        raise ClockError("join_tag")
    resolver = r.take(32, "resolver")
    fid = r.take(32, "fid")
    digest = r.take(32, "digest")
    ts = r.uint("ts")
    tips = [r.take(E.HASH_LEN, "tip") for _ in range(r.uint("tips", MAX_TIPS))]
    proofs = [r.take(PROOF_LEN, "proof") for _ in range(r.uint("proofs", MAX_PROOFS))]
    signed = r.pos
    sig = r.take(64, "sig")
    r.end()
    if not crypto.verify(resolver, bytes(raw[:signed]), sig):
        raise ClockError("signature")
    if not proofs:
        raise ClockError("no_fork")
    for p in proofs:
        if verify_proof(p)[0] != fid:
            raise ClockError("proof_feed")
    return Join(resolver, fid, digest, ts, tips, proofs, bytes(raw))


def check_join(join, dag):
    """Does a join agree with our copy of the feed (same tips, same digest)?

    Returns:
        True when our join strategy yields the same result.
    """
    return dag.key == join.fid and dag.digest() == join.digest and \
        tips_in_join_order(dag) == join.tips
