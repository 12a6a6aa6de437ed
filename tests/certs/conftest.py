"""Shared builders for the certificate tests: feeds of plain48 entries signed with a
scheme (KeyedHash where signatures are not under test, Ed25519 where they are)."""
import pytest

from tinyssb import entry
from tinyssb.store import MemStore
from tssb.certs import CertLog, MemRecords
from tssb.certs.keys import ED25519, KeyedHash

FAST = KeyedHash()


class Feed:
    """An authored feed: entries in a MemStore, records in a CertLog."""

    def __init__(self, seed, scheme=FAST, store=None, records=None):
        self.scheme = scheme
        self.seed = seed
        self.fid = scheme.public(seed)
        self.store = store if store is not None else MemStore()
        self.store.add_feed(self.fid)
        self.log = CertLog(records if records is not None else MemRecords(), self.fid, scheme)
        self.author = entry.Author(self.fid, lambda m: scheme.sign(seed, m))

    def grow(self, n, tag=b"m", certify=True):
        """Append n entries with contents tag + number; certify them."""
        for _ in range(n):
            seq, pkt, mid, _ = self.author.next(tag + b"%d" % (self.author.seq + 1),
                                                typ=entry.PLAIN48)
            self.store.append(self.fid, seq, pkt, mid)
        if certify:
            self.log.certify(self.store, self.seed)
        return self

    def cert(self, seq, anchor=None):
        return self.log.certificate(self.store, seq, anchor).encode()

    def fork(self, at):
        """A second history of the same key sharing entries 1..at-1 with this one; the
        caller grows it with other contents (`grow(n, tag=...)`)."""
        other = Feed(self.seed, self.scheme)
        for seq in range(1, at):
            other.store.append(self.fid, seq, self.store.entry(self.fid, seq), self.log.mid(seq))
        other.author.seq = at - 1
        other.author.prev = self.log.mid(at - 1)
        other.log.certify(other.store, other.seed)
        return other


@pytest.fixture
def feed_factory():
    def make(n=0, seed=b"\x01" * 32, scheme=FAST, **kw):
        return Feed(seed, scheme, **kw).grow(n)
    return make


@pytest.fixture(scope="module")
def feed1024():
    return Feed(b"\x07" * 32).grow(1024)


__all__ = ["Feed", "FAST", "ED25519"]
