"""Index spaces: the sets WANT and CHNK can be keyed by, and which of them neighbours share.

A WANT or CHNK names feeds by their index in a sorted set and carries that set's state in
its DMX, so it means something only to a node that knows the set. A deployed node knows
one set, its own GOSET. Our nodes keep several (bounded):
  goset      the node's whole GOSET (what deployed neighbours share, junk and all)
  announced  the keys this node vouches for (followed here or verified here): what it
             announces to our other nodes in coded-symbol beacons (gosetx)
  views      sets our neighbours announced, learned from their beacons (gosetx)
A WANT or CHNK is answered under any of them, and sent under those some neighbour showed
it holds: a claim describing exactly our GOSET, a beacon of that set, a WANT or CHNK keyed
by it. Evidence expires, so a node that heard nobody for EVIDENCE_MS stops asking, and a
junk packet can at most make it ask a few times nobody answers. Junk keys in our GOSET
change the goset state but not the announced one, and a neighbour's junk does not change
our view of what it announced: WANT/CHNK between our nodes go on whatever junk arrives.

Anyone can show a set (a forged beacon is a view like any other), but only a set some
node really holds brings verified entries and chunks back. So a space whose last request
did (`used`) is asked under first and is the last view evicted; the others are tried one
request in EXPLORE (a flood of forged views can neither push out nor crowd out the view a
node replicates from).
"""
from tinyssb.dmx import chnk_dmx, want_dmx

EVIDENCE_MS = 90000   # a neighbour's set counts as shared this long after its last sign:
                      # four deployed full-claim periods (20 s), over our beacon period
MAX_VIEWS = 6         # neighbours' sets kept (each a list of key references, <= 255)
EXPLORE = 4           # one request in this many goes to a space that brought nothing yet
FAILED = -1           # Space.used after a request keyed by it brought nothing


class Space:
    """A sorted key list under one state, with the WANT/CHNK DMX values it keys."""
    __slots__ = ("keys", "state", "want_dmx", "chnk_dmx", "seen", "name", "offs", "used")

    def __init__(self, keys, state, name):
        self.keys = keys
        self.state = state
        self.want_dmx = want_dmx(state)
        self.chnk_dmx = chnk_dmx(state)
        self.seen = None    # ms of the last sign that a neighbour holds this set
        self.name = name    # "goset", "announced" or "view"
        self.offs = 0       # WANT round-robin start
        self.used = None    # ms our last request keyed by it brought verified entries or
                            # chunks; None: never asked under it; FAILED: it brought nothing

    def live(self, now):
        return self.seen is not None and now - self.seen < EVIDENCE_MS

    def rank(self):
        """Sort key, best first: useful (most recently first), not tried yet (most
        recently shown first), tried in vain."""
        u = self.used
        if u is not None and u >= 0:
            return (0, -u)
        return (1 if u is None else 2, -(self.seen or 0))


class Spaces:
    """The node's own two spaces plus neighbours' views, looked up by DMX."""

    def __init__(self):
        self.goset = None
        self.announced = None
        self.views = []
        self._by_dmx = {}
        self._turn = 0

    def set_own(self, name, keys, state):
        """Replace an own space when its state changed (evidence is per state)."""
        old = getattr(self, name)
        if old is not None and old.state == state:
            old.keys = keys
            return old
        sp = None
        for v in self.views:
            if v.state == state:
                sp = v     # a neighbour announced exactly this set: evidence carries over
                break
        new = Space(keys, state, name)
        if sp is not None:
            new.seen = sp.seen
            new.used = sp.used
        setattr(self, name, new)
        self._index()
        return new

    def add_view(self, keys, state, now):
        """Record a neighbour's set (sorted keys); return its Space (evidence now). An
        empty set is no space to ask under: None."""
        if not keys:
            return None
        for v in self.views:
            if v.state == state:
                v.keys = keys
                self.seen(state, now)
                return v
        v = Space(keys, state, "view")
        v.seen = now
        self.views.append(v)
        if len(self.views) > MAX_VIEWS:
            self.views.sort(key=lambda s: s.rank())
            self.views.pop()    # the least useful
        self._index()
        self.seen(state, now)
        return v

    def view(self, state):
        for v in self.views:
            if v.state == state:
                return v
        return None

    def drop_stale(self, now):
        keep = [v for v in self.views if v.live(now)]
        if len(keep) != len(self.views):
            self.views = keep
            self._index()

    def _index(self):
        m = {}
        for sp in self.all():
            m[sp.want_dmx] = (sp, True)
            m[sp.chnk_dmx] = (sp, False)
        self._by_dmx = m

    def all(self):
        out = [s for s in (self.goset, self.announced) if s is not None]
        for v in self.views:
            if v.state not in [s.state for s in out]:
                out.append(v)
        return out

    def lookup(self, dmx):
        """(Space, is_want) for a WANT or CHNK DMX we understand, else None."""
        return self._by_dmx.get(dmx)

    def seen(self, state, now):
        """A neighbour showed it holds the set with this state."""
        for sp in self.all():
            if sp.state == state:
                sp.seen = now
        for v in self.views:
            if v.state == state:
                v.seen = now

    def shared(self, now):
        """Spaces some neighbour showed it holds, one per state; those that brought
        verified data first, most recently useful first."""
        out = []
        states = []
        for sp in self.all():
            if sp.live(now) and sp.state not in states:
                states.append(sp.state)
                out.append(sp)
        out.sort(key=lambda s: s.rank())
        return out

    def lacking(self, key, now):
        """True when a live view (a neighbour's set we know) lacks `key`."""
        for v in self.views:
            if v.live(now) and key not in v.keys:
                return True
        return False

    def useful(self, now):
        """True when a shared space brought data on its last request."""
        for sp in self.shared(now):
            if sp.rank()[0] == 0:
                return True
        return False

    def next_shared(self, now):
        """The spaces to key the next WANT by, in the order to try them (the first that
        has something to ask wins): the shared ones in turn, those that brought verified
        data first (the others one request in EXPLORE)."""
        sh = self.shared(now)
        if not sh:
            return sh
        self._turn += 1
        used = [s for s in sh if s.rank()[0] == 0]
        rest = sh[len(used):]
        if used:
            k = self._turn % len(used)
            used = used[k:] + used[:k]
        if used and rest and self._turn % EXPLORE == 0:
            return rest + used
        return used + rest
