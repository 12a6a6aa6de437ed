"""An entity as a DAG of events: default join strategy, version digest, Bloom stamps.

Linearisation (the spec's default join strategy, "fork resolution" section): follow the
chain of events from the root; where an event has several successors (a fork) every
branch is kept, the branches sorted by the id (hash) of their first event and ties by the
full bytes of that event; a join event (one referring to several events) continues the
enclosing chain once all of its references are linearised. Several roots are a fork at an
empty root. This applies recursively to forks inside branches.

Merkle tree (the Version Digest), SHA-256, one-byte domain tags:

    LEAF(eid)        = H(0x00 || eid)
    INNER(l, r)      = H(0x01 || l || r)
    FORK(branches)   = H(0x02 || MTH(root of each branch, in join order))
    KEYED(key, root) = H(0x03 || key || root)   one entity inside a set (common feeds)
    EMPTY            = H(0x04)

MTH(list) splits at the largest power of two below the length (RFC 6962 §2.1), so
appending events changes only the right spine and a peer that lags behind still shares
the left subtrees.

    chain a b (fork: [c d] [c' ]) j e  ->  MTH(LEAF a, LEAF b, FORK(MTH(c,d), MTH(c')), LEAF j, LEAF e)
"""
import hashlib

from tssb.clock.bloom import BloomClock
from tssb.clock.errors import ClockError

T_LEAF, T_INNER, T_FORK, T_KEYED, T_EMPTY = 0, 1, 2, 3, 4
EMPTY = hashlib.sha256(bytes([T_EMPTY])).digest()
# Nesting of forks inside branches we follow before refusing (recursion depth); an honest
# feed forks rarely, so 64 levels is far beyond real use.
MAX_FORK_DEPTH = 64


def h_leaf(eid):
    return hashlib.sha256(bytes([T_LEAF]) + eid).digest()


def h_inner(l, r):
    return hashlib.sha256(bytes([T_INNER]) + l + r).digest()


def h_fork(sub):
    return hashlib.sha256(bytes([T_FORK]) + sub).digest()


def h_keyed(key, root):
    return hashlib.sha256(bytes([T_KEYED]) + key + root).digest()


def mth(hashes, nodes):
    """Merkle tree hash over a list of node hashes; records INNER nodes in `nodes`."""
    n = len(hashes)
    if n == 0:
        return EMPTY
    if n == 1:
        return hashes[0]
    k = 1
    while k * 2 < n:
        k *= 2
    l = mth(hashes[:k], nodes)
    r = mth(hashes[k:], nodes)
    h = h_inner(l, r)
    nodes[h] = (T_INNER, (l, r))
    return h


class EventDAG:
    """The events of one entity known locally.

    Args:
        key: the entity's key (FID or thread root id).
        n, k: Bloom clock parameters for its stamps.
    """

    def __init__(self, key, n, k):
        self.key = key
        self.n = n
        self.k = k
        self.events = {}
        self._cache = None

    def __len__(self):
        return len(self.events)

    def __contains__(self, eid):
        return eid in self.events

    def can_add(self, ev):
        """True when every back reference is known (or the event is a root)."""
        return ev.is_root or all(p in self.events for p in ev.prevs)

    def add(self, ev):
        """Insert a validated event whose references are all present.

        Returns:
            True if new, False if already known.
        Raises:
            ClockError: "orphan" when a reference is missing, "entity" on a wrong key.
        """
        if ev.key != self.key:
            raise ClockError("entity")
        if ev.eid in self.events:
            return False
        if not self.can_add(ev):
            raise ClockError("orphan", ev.eid.hex())
        self.events[ev.eid] = ev
        self._cache = None
        return True

    # -- linearisation ------------------------------------------------------------------

    def _present_prevs(self, ev):
        return [p for p in ev.prevs if p in self.events]

    def linearize(self):
        """The join strategy's ordering as nested items: ("leaf", eid) and
        ("fork", [items of branch 1, items of branch 2, ...])."""
        ev = self.events
        pp = {e: self._present_prevs(x) for e, x in ev.items()}
        kids = {e: [] for e in ev}
        for e, ps in pp.items():
            for p in ps:
                kids[p].append(e)
        roots = [e for e, ps in pp.items() if not ps]

        def order(eids):
            return sorted(eids, key=lambda e: (e, ev[e].raw))

        def chain(starts, depth):
            if depth > MAX_FORK_DEPTH:
                raise ClockError("fork_depth")
            items = []
            pending = {}
            cur = order(starts)
            while cur:
                if len(cur) == 1:
                    e = cur[0]
                    items.append(("leaf", e))
                    nxt = []
                    for c in kids[e]:
                        if len(pp[c]) == 1:
                            nxt.append(c)
                        else:
                            pending[c] = pending.get(c, 0) + 1
                else:
                    branches = []
                    for s in cur:
                        b_items, b_pending = chain([s], depth + 1)
                        branches.append(b_items)
                        for j, cnt in b_pending.items():
                            pending[j] = pending.get(j, 0) + cnt
                    items.append(("fork", branches))
                    nxt = []
                ready = [j for j, cnt in pending.items() if cnt == len(pp[j])]
                for j in ready:
                    del pending[j]
                cur = order(nxt + ready)
            return items, pending

        items, _ = chain(roots, 0)
        return items

    def order(self):
        """Event ids in join-strategy order (branches depth-first), a topological order."""
        out = []

        def walk(items):
            for kind, x in items:
                if kind == "leaf":
                    out.append(x)
                else:
                    for b in x:
                        walk(b)
        walk(self.linearize())
        return out

    # -- digest and stamps ------------------------------------------------------------

    def tree(self):
        """(root hash, nodes) where nodes maps hash -> (tag, data) for every node:
        LEAF -> eid, INNER -> (l, r), FORK -> sub. Cached until the next add."""
        if self._cache is None:
            nodes = {}

            def build(items):
                hs = []
                for kind, x in items:
                    if kind == "leaf":
                        h = h_leaf(x)
                        nodes[h] = (T_LEAF, x)
                    else:
                        sub = mth([build(b) for b in x], nodes)
                        h = h_fork(sub)
                        nodes[h] = (T_FORK, sub)
                    hs.append(h)
                return mth(hs, nodes)
            root = build(self.linearize())
            self._cache = (root, nodes, None)
        return self._cache[0], self._cache[1]

    def digest(self):
        """The Version Digest: root of the Merkle tree (EMPTY for no events)."""
        return self.tree()[0]

    def stamps(self):
        """Bloom Clock Stamp per event: merge of its references' stamps plus itself."""
        self.tree()
        if self._cache[2] is None:
            st = {}
            for e in self.order():
                c = BloomClock(self.n, self.k)
                for p in self._present_prevs(self.events[e]):
                    c = c.merge(st[p])
                st[e] = c.increment(e)
            self._cache = (self._cache[0], self._cache[1], st)
        return self._cache[2]

    def stamp(self):
        """The entity's stamp: merge of all event stamps (= of its tips)."""
        c = BloomClock(self.n, self.k)
        for s in self.stamps().values():
            c = c.merge(s)
        return c

    def likely_missing(self, peer_stamp):
        """Events the holder of `peer_stamp` likely lacks: those whose stamp is not
        <= it (a false positive of `<=` hides an event; the digest check catches that).
        Returned in topological order so the receiver can insert them as they come."""
        st = self.stamps()
        return [self.events[e] for e in self.order() if not st[e] <= peer_stamp]

    def tips(self):
        """Events nobody refers to (the heads of all branches)."""
        referenced = set()
        for x in self.events.values():
            referenced.update(x.prevs)
        return [e for e in self.events if e not in referenced]
