"""A reconcilable set with incremental state (the issue's "incremental state").

Each element's SHA-512 hash is computed once when it is added. The 64-bit HKDF keys of the
GNUnet and tssb2 profiles are computed when one of their structures is first asked for (a
rateless-only host never pays for them) and from then on once per added element; the strata
estimators, the GNUnet-profile IBFs already built at salt 0, the tssb2 base IBF and the
rateless prefix are updated per added element, so a sync with few differences never rehashes
the set. Only a retry with a new salt (rare) walks the cached keys again.
"""
from . import constants as C
from .ibf import IBF
from .profiles import element_hash, key_from_hash, salt_key
from .rateless_prefix import RatelessPrefix, element_key
from .strata import StrataEstimator

_IBF_CACHE = 4          # salt-0 IBF sizes kept up to date per profile
_CACHE_FACTOR = 4       # ... only up to 4 buckets per element: honest IBFs are about twice
                        # the difference, which our own set bounds; a size a peer picked
                        # beyond that is built, used and dropped (its budget charge ends)
_BASE_RATIO = 16        # tssb2 base IBF: 2^j >= n / 16 buckets per third


class ElementSet:
    """Elements (bytes) of one application element type, with their hashes and keys.

    Args:
        etype: application element type carried in ELEMENT messages.
        check: callable(data) -> bool, the application check run on every received element.
    """

    def __init__(self, etype=0, check=None):
        self.etype = etype
        self.check = check
        self.elements = {}     # hash -> data
        self.keys = {}         # hash -> unsalted key (once materialised, see _keyed)
        self.by_key = {}       # key -> hash, or list of hashes on a 64-bit collision
        self._keyed = False    # keys/by_key hold every element
        self._rl = None        # rateless prefix (RatelessPrefix) once asked for
        self._rl_keys = {}     # rateless 5-byte key -> hash, or list of hashes
        self.checksum = 0      # XOR of all element hashes (as an int): the final checksum
        self.total_bytes = 0
        self.on_add = []       # callbacks(data, ehash): persistence hooks
        self._se = {}          # profile id -> StrataEstimator
        self._ibfs = {}        # (profile id, size) -> salt-0 IBF (GNUnet profile)
        self._base = None      # tssb2 salt-0 base IBF

    def __len__(self):
        return len(self.elements)

    def avg_element_size(self):
        return self.total_bytes // len(self.elements) if self.elements else 0

    def checksum_bytes(self):
        return self.checksum.to_bytes(C.HASH_SIZE, "big")

    def has(self, ehash):
        return ehash in self.elements

    def hashes_for_key(self, key):
        self._materialise()
        v = self.by_key.get(key)
        if v is None:
            return []
        return v if isinstance(v, list) else [v]

    def _materialise(self):
        if not self._keyed:
            self._keyed = True
            for h in self.elements:
                self._index_key(h)

    def _index_key(self, ehash):
        key = key_from_hash(ehash)
        self.keys[ehash] = key
        old = self.by_key.get(key)
        if old is None:
            self.by_key[key] = ehash
        elif isinstance(old, list):
            old.append(ehash)
        else:
            self.by_key[key] = [old, ehash]
        return key

    # -- rateless profile ----------------------------------------------------------------

    def rateless(self, m):
        """The rateless prefix, at least m symbols long, with queued appends applied."""
        rl = self._rl
        if rl is None:
            rl = self._rl = RatelessPrefix(m)
            for h in self.elements:
                self._rl_index(h)
        elif rl.m < m:
            rl.extend(m)
        rl.flush()
        return rl

    def _rl_index(self, ehash):
        k = element_key(ehash)
        old = self._rl_keys.get(k)
        if old is None:
            self._rl_keys[k] = ehash
        elif isinstance(old, list):
            old.append(ehash)
        else:
            self._rl_keys[k] = [old, ehash]
        self._rl.add_key(k)

    def hashes_for_rateless_key(self, key):
        v = self._rl_keys.get(bytes(key))
        if v is None:
            return []
        return v if isinstance(v, list) else [v]

    def has_rateless_key(self, key):
        return bytes(key) in self._rl_keys

    def rateless_elements(self, key):
        """Elements whose rateless key is `key` (usually one)."""
        return [self.elements[h] for h in self.hashes_for_rateless_key(key)]

    def rateless_keys(self):
        return self._rl_keys.keys()

    def add(self, data, ehash=None):
        """Add an element; returns its hash, or None if it was already present."""
        data = bytes(data)
        if len(data) > C.MAX_ELEMENT_SIZE:
            raise ValueError("element too large")
        if ehash is None:
            ehash = element_hash(self.etype, data)
        if ehash in self.elements:
            return None
        self.elements[ehash] = data
        self.checksum ^= int.from_bytes(ehash, "big")
        self.total_bytes += len(data)
        if self._rl is not None:
            self._rl_index(ehash)   # queued: applied in a batch when the prefix is read
        if self._keyed:
            key = self._index_key(ehash)
            for se in self._se.values():
                se.insert(key)
            for ibf in self._ibfs.values():
                ibf.insert(key)
            if self._base is not None:
                self._base.insert(key)
                if (self._base.size // 3) * _BASE_RATIO * 2 < len(self.elements):
                    self._base = None  # rebuilt larger on next use (amortised doubling)
        for cb in self.on_add:
            cb(data, ehash)
        return ehash

    def strata(self, profile, count):
        """Strata estimator with `count` estimators for `profile`, kept up to date."""
        self._materialise()
        se = self._se.get(profile.pid)
        if se is None:
            se = StrataEstimator(profile, count)
            for key in self.keys.values():
                se.insert(key)
            self._se[profile.pid] = se
        elif se.count < count:
            se.extend(count, self.keys.values())
        return se.prefix(count)

    def ibf(self, profile, size, salt):
        """The set's IBF of `size` buckets at `salt` (do not mutate the result)."""
        self._materialise()
        if salt == 0 and profile.foldable:
            base = self._base
            if base is None:
                m = 16
                while m * _BASE_RATIO < len(self.elements):
                    m *= 2
                base = self._base = self._build(profile, max(3 * m, profile.min_size), 0)
            if size <= base.size and base.size % size == 0:
                return base if size == base.size else base.fold(size)
        if salt == 0:
            ibf = self._ibfs.get((profile.pid, size))
            if ibf is None:
                ibf = self._build(profile, size, 0)
                if size > _CACHE_FACTOR * len(self.elements) + C.IBF_MIN_SIZE:
                    return ibf
                if len(self._ibfs) >= _IBF_CACHE:
                    self._ibfs.pop(next(iter(self._ibfs)))
                self._ibfs[(profile.pid, size)] = ibf
            return ibf
        return self._build(profile, size, salt)

    def _build(self, profile, size, salt):
        ibf = IBF(profile, size)
        for key in self.keys.values():
            ibf.insert(salt_key(key, salt))
        return ibf

    def copy(self):
        """Independent copy, incremental state included (cheaper than re-adding)."""
        o = ElementSet(self.etype, self.check)
        o.elements = dict(self.elements)
        o.keys = dict(self.keys)
        o.by_key = {k: (v[:] if isinstance(v, list) else v) for k, v in self.by_key.items()}
        o.checksum = self.checksum
        o.total_bytes = self.total_bytes
        o._keyed = self._keyed
        o._rl = self._rl.copy() if self._rl is not None else None
        o._rl_keys = {k: (v[:] if isinstance(v, list) else v) for k, v in self._rl_keys.items()}
        o._se = {p: se.copy() for p, se in self._se.items()}
        o._ibfs = {k: v.copy() for k, v in self._ibfs.items()}
        o._base = self._base.copy() if self._base is not None else None
        return o
