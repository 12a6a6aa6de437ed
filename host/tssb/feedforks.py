"""Forks of feeds that reach this host: two validly signed entries of one feed at one seq.

Only the feed's key can have signed both, so the pair convicts its owner (or shows that
one identity posts from two homes that do not sync: a restored backup, an imported
identity). A host keeps the first pair it meets per (feed, seq) as a proof in the
clock's format (tssb.clock.forks: the two 176-byte feed events, smaller MID first) in the
store's `clock_forks` table, whatever brought the second entry: a SETU sync (`note`), a
clock sync (which stored them there first). `tssb sync`, `read`, `store check` and the
web view name them.
"""
from tinyssb import entry

from tssb.clock import events as E
from tssb.clock import forks
from tssb.clock.errors import ClockError


def _prev(store, fid, seq):
    return entry.genesis_prev(fid) if seq == 1 else store.mid(fid, seq - 1)


def note(store, fid, seq, prev, pkt):
    """A verified entry (fid, seq, prev, pkt) arrived: if the store holds another entry at
    (fid, seq), keep the pair as a fork proof.

    Returns: True when a new fork was recorded.
    """
    fid, prev, pkt = bytes(fid), bytes(prev), bytes(pkt)
    ours = store.entry(fid, seq)
    if ours is None or bytes(ours) == pkt:
        return False
    our_prev = _prev(store, fid, seq)
    if our_prev is None:
        return False
    try:
        proof = forks.make_proof(E.feed_event_bytes(fid, seq, bytes(our_prev), bytes(ours)),
                                 E.feed_event_bytes(fid, seq, prev, pkt))
    except ClockError:
        return False      # one of them does not verify: no proof against the key
    return store.add_fork(fid, seq, proof)


def of_feed(store, fid):
    """The seqs at which feed `fid` is known to have forked."""
    return [seq for _, seq, _ in store.forks(fid)]


def describe(ctx, fid, seq, names=None):
    """One line naming a fork for the user."""
    fid = bytes(fid)
    if fid == ctx.identity.public:
        who = "your own feed %s" % fid.hex()[:16]
    else:
        name = (names or {}).get(fid)
        who = "feed %s%s" % (fid.hex()[:16], " (%s)" % name if name else "")
    return ("%s has two different entries at seq %d, both signed by its key: it forked "
            "(the proof is kept; `tssb clock status` lists it)" % (who, seq))
