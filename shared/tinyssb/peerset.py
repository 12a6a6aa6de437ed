"""A deployed neighbour's set, as far as its claims tell (our nodes, extended mode).

A deployed node reveals keys only as claim boundaries and novelties, two per help round
of 5 s. But a claim also tells the (count, XOR) of a region of its set, and where that
region holds exactly one key more than ours, the XOR difference is that key: a
*candidate*. Not for sure (the region may hold two more and one fewer), so a candidate
is never learned, shown, or claimed; it is confirmed by the deployed node itself. WANT
and CHNK name feeds by index in the sender's set, keyed by that set's XOR, which its full
claim gives: a WANT keyed by it, asking entry 1 at the candidate's index there, is
answered with the entry of whatever feed sits there. An entry that verifies under the
candidate makes it ours (verified: the strongest trust there is); a wrong candidate
draws another feed's entry (dropped as a copy) or nothing, and expires. The deployed
node sees nothing it would misread: its own set's WANT, an index into it.

The index: every claim says its ends are count - 1 apart in the neighbour's set; its
help for a region we asked about (lo, hi) splits the keys strictly inside into halves,
claimed in turn, so the first half starts right after lo and the second ends right
before hi; its full claim's lowest key is its rank 0. Ranks spread along these
differences from rank 0; a candidate in a region whose lower end is ranked sits at that
rank plus our keys in between (the region is ours plus the candidate). When our set
plus all candidates adds up to a claim's count and XOR, that claim is the neighbour's
whole set and every index is known at once.

Its full claim also tells its whole set: less ours and the candidates, plus what it
lacks, one key left is the XOR difference (remainder).

Feeds with no entry cannot be confirmed this way; for them the deployed claim dance goes
on (goset.py).
"""
from tinyssb.hotloops import xor_into

CANDIDATES = 16       # keys a claim names only by its XOR, kept until an entry confirms
CANDIDATE_MS = 30000  # them, for at most this long (1.5 deployed full-claim periods)
CLAIMS_HEARD = 8      # (count, XOR) of recent claims: a deployed neighbour's whole set is
CLAIM_HEARD_MS = 60000  # one of them (its full claim, every 20 s)
ASKS = 16             # our recent asks (claims of ours) a help may answer ...
ASK_MS = 12000        # ... within two deployed rounds
FULL_FRESH_MS = 25000  # a deployed full claim is fresh this long (its period, 20 s, and
                      # a round: ours must not cross its next one)
PROBE_GAP_MS = 6000   # a candidate is probed again after a deployed round at the soonest
HELPED_MS = 30000     # a region the neighbour helped with is not asked for again sooner
PROBE_WAIT_MS = 3000  # a region holding a candidate is not asked for meanwhile (a WANT
                      # reply takes one round trip)


class PeerSet:
    """Args:
        goset: the GOSet (extended mode) whose keys are "ours".
    """

    def __init__(self, goset):
        self.g = goset
        self.candidates = {}   # key -> [ms found, lower end of its region, ms probed]
        self.claims = []       # [count, XOR, ms] of recent claims
        self.full = None       # (count, XOR) of the claim spanning the neighbour's set
        self.full_span = None  # (its lowest key, its highest): ours too when it spanned
        self.full_ms = None    # when last heard (claims rotate out of self.claims)
        self.ranks = {}        # key -> its index in that set
        self.edges = []        # (a, b, d): rank(b) - rank(a) = d, from its claims
        self.anchor = None     # its lowest key (rank 0)
        self.told = []         # our keys it lacks (named in novelties), until its next
                               # full claim shows them
        self.asks = []         # (lo key, hi key, ms) of our recent asks
        self.helped = {}       # (lo key, hi key) of an ask the neighbour helped with ->
                               # [ms, upper end of its first half, lower end of its second,
                               #  (count, XOR) of its first half, of its second]

    # -- what the neighbour says -------------------------------------------------------

    def claim(self, lo, hi, xor, cnt, now):
        """A deployed claim (its boundary keys already in our set, as the GOSET learns
        them)."""
        g = self.g
        cl = self.claims
        for c in cl:
            if c[0] == cnt and c[1] == xor:
                c[2] = now
                break
        else:
            cl.append([cnt, xor, now])
            if len(cl) > CLAIMS_HEARD:
                cl.pop(0)
        n = len(g.keys)
        if n and g.keys[0] == lo and g.keys[n - 1] == hi:
            # spans our whole set: the neighbour's full claim (its lowest, highest key)
            self.full_span = (lo, hi)
            self.full_ms = now
            if self.full != (cnt, xor):
                self.full = (cnt, xor)
                self.edges = []
                self.helped = {}
                self.told = [k for k in self.told if k not in g.keys or k < lo or k > hi]
            self.anchor = lo
        self._edge(lo, hi, cnt - 1)
        a = self._ask_around(lo, hi, now)
        if a is not None:
            # a help for our ask a: the first half starts right after a's lower end, the
            # second ends right before its upper one (none of our keys between); a
            # single claim (the inside was 2 or 3 keys) does both
            halves = self.helped.get((a[0], a[1]))
            if halves is None or now - halves[0] >= HELPED_MS:
                halves = [now, None, None, None, None]
                if len(self.helped) < ASKS:
                    self.helped[(a[0], a[1])] = halves
            first = self._adjacent(a[0], lo)
            if first:
                self._edge(a[0], lo, 1)
                halves[1] = hi
                halves[3] = (cnt, xor)
            if self._adjacent(hi, a[1]):
                self._edge(hi, a[1], 1)
                halves[2] = lo
                # (one claim for both: the inside was 2 or 3 keys)
                halves[4] = (0, bytes(32)) if first else (cnt, xor)
            if halves[1] is not None and halves[2] is not None and halves[1] < halves[2]:
                self._edge(halves[1], halves[2], 1)     # the halves meet
        self._ranks()

    def novelty(self, key, now):
        """A deployed novelty: a help for a region of ours whose inside is one key."""
        a = self._ask_around(key, key, now)
        if a is not None and self._adjacent(a[0], key) and self._adjacent(key, a[1]):
            self._edge(a[0], key, 1)
            self._edge(key, a[1], 1)
            self._ranks()

    def _ask_around(self, lo, hi, now):
        """The innermost recent ask of ours strictly around lo..hi, or None."""
        best = None
        for a in self.asks:
            if now - a[2] < ASK_MS and a[0] < lo and hi < a[1] and (
                    best is None or best[0] <= a[0] and a[1] <= best[1]):
                best = a
        return best

    def _edge(self, a, b, d):
        """rank(b) - rank(a) = d in the neighbour's set."""
        e = self.edges
        if len(e) < 4 * self.g.capacity and (a, b, d) not in e:
            e.append((a, b, d))

    def _ranks(self):
        """Ranks from the anchor (its lowest key, rank 0) along the edges."""
        r = {}
        if self.anchor is not None and self.full is not None:
            r[self.anchor] = 0
            grew = True
            while grew:
                grew = False
                for a, b, d in self.edges:
                    if a in r and b not in r:
                        r[b] = r[a] + d
                        grew = True
                    elif b in r and a not in r:
                        r[a] = r[b] - d
                        grew = True
        self.ranks = r

    def halves(self, lo, hi, now):
        """((count, XOR), (count, XOR)) of the two halves of its help for our ask lo..hi
        (the keys strictly inside), or None until both are in."""
        h = self.helped.get((lo, hi))
        if h is None or now - h[0] >= HELPED_MS or h[3] is None or h[4] is None:
            return None
        return h[3], h[4]

    def was_helped(self, lo, hi, now):
        """The neighbour helped with our region lo..hi already (claimed its halves): asking
        again would only bring the same halves, while its set stays."""
        h = self.helped.get((lo, hi))
        return h is not None and now - h[0] < HELPED_MS

    def lacks(self, key):
        """The neighbour lacks `key` (a claim's XOR shows; we name it in a novelty): not
        in its set for our index counts until its next full claim. False when named
        already."""
        if key in self.told:
            return False
        if len(self.told) < self.g.capacity:
            self.told.append(key)
        return True

    def asked(self, lo, hi, now):
        """We claimed our region lo..hi (asking the neighbour for help there)."""
        self.asks.append((lo, hi, now))
        if len(self.asks) > ASKS:
            self.asks.pop(0)

    def candidate(self, key, lo, now):
        """A claim's region from `lo` holds our keys plus, maybe, `key`."""
        c = self.candidates
        if key in c:
            return
        if len(c) >= CANDIDATES:
            self.g.removed.append(next(iter(c)))
            del c[next(iter(c))]
        c[key] = [now, lo, None]

    def _adjacent(self, a, b):
        g = self.g
        i = g.index(a)
        return i >= 0 and g.index(b) == i + 1

    # -- what we do with it ----------------------------------------------------------

    def expire(self, now):
        for k in [k for k, v in self.candidates.items() if now - v[0] >= CANDIDATE_MS]:
            del self.candidates[k]
            self.g.removed.append(k)    # (the node drops its probe replica)

    def heard(self, now):
        """The neighbour's full claim, heard within a claim period, spans our whole set: we
        answer it region by region, and our own full claim would only bring its ask for
        our whole set and its help with it (three claims of 105 B). (Keys of ours outside
        the span of its claims need ours.)"""
        f = self.full
        if f is None:
            return False
        g = self.g
        n = len(g.keys)
        return n > 0 and self.full_span == (g.keys[0], g.keys[n - 1]) and \
            now - self.full_ms < FULL_FRESH_MS

    def probing(self, lo, hi, now):
        """A candidate between these keys may still be confirmed (see PROBE_WAIT_MS)."""
        for k, v in self.candidates.items():
            if lo < k < hi and now - v[0] < PROBE_WAIT_MS:
                return True
        return False

    def probes(self, now):
        """[(candidate, the neighbour's set XOR, its index there)] to ask for now."""
        g = self.g
        whole = self._whole(now)
        out = []
        for k, v in self.candidates.items():
            if v[2] is not None and now - v[2] < PROBE_GAP_MS:
                continue
            i = None
            if whole is not None:
                i, x = whole[1].index(k), whole[0]
            elif self.full is not None and v[1] in self.ranks:
                # the region from v[1] is ours plus k: k's rank is v[1]'s plus our keys
                # from v[1] up to k (but those it lacks)
                i = self.ranks[v[1]] + g._pos(k) - g.index(v[1])
                for t in self.told:
                    if v[1] <= t < k:
                        i -= 1
                x = self.full[1]
            if i is not None and 0 <= i < 255:
                v[2] = now
                out.append((k, x, i))
        return out

    def _whole(self, now):
        """(XOR, sorted keys) when our set plus every candidate is a set a recent claim
        describes (its count and XOR): the neighbour's whole set."""
        g = self.g
        told = [k for k in self.told if k in g.meta]
        n = len(g.keys) + len(self.candidates) - len(told)
        x = bytearray(g.state)
        for k in self.candidates:
            xor_into(x, k)
        for k in told:
            xor_into(x, k)
        x = bytes(x)
        cl = self.claims
        if self.full is not None:
            cl = cl + [[self.full[0], self.full[1], self.full_ms]]
        for c in cl:
            if c[0] == n and c[1] == x and now - c[2] < CLAIM_HEARD_MS:
                keys = [k for k in g.keys if k not in told] + list(self.candidates)
                keys.sort()
                return x, keys
        return None

    def confirmed(self, key):
        self.candidates.pop(key, None)

    def remainder(self, now):
        """(sign, key) for the one key that the neighbour's whole set and ours, all else
        we know counted, still differ by, or None. Its whole set is its largest recent
        claim (its full claim); less ours, less the candidates, plus the keys it lacks:
        when the counts differ by exactly one, the XOR difference is that key: +1, a key
        of its (a candidate, confirmed by its entry like any other); -1, a key of ours it
        lacks (named in a novelty). So a claim that names one key of a two-sided
        difference of two names both, and the last key of a one-sided difference needs
        no help round of its own. A wrong answer (a stale claim, a key named that it had
        learned meanwhile) is a candidate that is never confirmed, or a key of ours that
        is not in our set: nothing."""
        g = self.g
        best = None
        if self.full is not None and now - self.full_ms < CLAIM_HEARD_MS:
            best = self.full
        for c in self.claims:
            if now - c[2] < CLAIM_HEARD_MS and (best is None or c[0] > best[0]):
                best = c
        if best is None:
            return None
        told = [k for k in self.told if k in g.meta]
        d = best[0] - (len(g.keys) + len(self.candidates) - len(told))
        if d != 1 and d != -1:
            return None
        x = bytearray(best[1])
        xor_into(x, g.state)
        for k in self.candidates:
            xor_into(x, k)
        for k in told:
            xor_into(x, k)
        return d, bytes(x)
