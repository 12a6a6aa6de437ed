"""Helpers for trDAG tests: random DAGs written by several authors, pairs of replicas."""
import random

from tinyssb import entry
from tssb.trdag import dagstore, message


def author(rng):
    fid, sign = message.signer(bytes(rng.getrandbits(8) for _ in range(32)))
    return entry.Author(fid, sign)


def new_dag(seed=1, n_authors=3):
    """Returns (index, root_id, authors) with only the root message."""
    rng = random.Random(seed)
    authors = [author(rng) for _ in range(n_authors)]
    idx = dagstore.MemDagIndex()
    root = dagstore.post(idx, authors[0], None, "root").mid
    return idx, root, authors


def grow(idx, root, authors, n, rng, text="m"):
    """Post n messages on idx, each by a random author, referencing the current tips."""
    out = []
    for i in range(n):
        out.append(dagstore.post(idx, rng.choice(authors), root, "%s%d" % (text, i)))
    return out


def copy_into(dst, msgs):
    """Admit messages (in order) into another index."""
    d = dagstore.Dag(dst)
    for m in msgs:
        d.offer(m)


def member_ids(idx, root):
    return sorted(m for _, m in idx.members(root))


def pump(a, b, mutate=None, drop=None):
    """Run two SyncSessions against each other without I/O (in-order delivery).

    mutate(frame) -> frame is applied to b's outgoing frames (an adversarial b);
    drop(frame) -> bool drops some of them. Returns (error_a, error_b): the TrdagError
    each side raised, or None. A side's ABORT reaches the other side.
    """
    from tssb.trdag.errors import TrdagError
    to_b = list(a.start())
    to_a = list(b.start())
    err = [None, None]

    def outgoing(frames):
        out = []
        for f in frames:
            if drop is not None and drop(f):
                continue
            out.append(mutate(f) if mutate is not None else f)
        return out

    to_a = outgoing(to_a)
    while to_a or to_b:
        if to_b and not b.done:
            f = to_b.pop(0)
            try:
                to_a.extend(outgoing(b.receive(f)))
            except TrdagError as e:
                err[1] = e
                to_a.append(b.abort_frame(e)) if e.reason != "peer_abort" else None
                to_b = []
        elif to_b:
            to_b = []
        if to_a and not a.done:
            f = to_a.pop(0)
            try:
                to_b.extend(a.receive(f))
            except TrdagError as e:
                err[0] = e
                to_b.append(a.abort_frame(e)) if e.reason != "peer_abort" else None
                to_a = []
        elif to_a:
            to_a = []
    return err[0], err[1]


def sessions(idx_a, idx_b, root, options=None, feeds_a=None, feeds_b=None):
    from tssb.trdag import dagstore, session
    opt = session.BASIC if options is None else options
    a = session.SyncSession(dagstore.Dag(idx_a, feeds_a), root, True, opt)
    b = session.SyncSession(dagstore.Dag(idx_b, feeds_b), None, False)
    return a, b
