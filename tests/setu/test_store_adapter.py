"""tinySSB entries as self-validating elements, synced between two stores."""
import hashlib

from nacl.signing import SigningKey

from tinyssb.store import MemStore
from tssb.setu.machine import Config, Reconciler
from tssb.setu.tinyssb_elements import (StoreSource, check_element, make_element,
                                        split_element)

from helpers import make_feed as _feed, pump


def test_check_element_accepts_valid_and_rejects_tampered():
    st = MemStore()
    fid = _feed(st, b"a", 2)
    src = StoreSource(st)
    assert src.refresh() == 2
    for data in src.eset.elements.values():
        assert check_element(data)
        f, seq, prev, pkt = split_element(data)
        assert not check_element(make_element(f, seq, prev, pkt[:60] + b"\x01" + pkt[61:]))
        assert not check_element(make_element(f, seq, bytes(20), pkt))
    assert not check_element(b"short")
    assert fid in st.feeds()


def test_two_stores_reconcile_and_store_receives_in_order():
    s1, s2 = MemStore(), MemStore()
    f1 = _feed(s1, b"one", 12)
    f2 = _feed(s2, b"two", 7)
    both = _feed(s1, b"both", 5)
    _feed(s2, b"both", 9)           # s2 is ahead on the shared feed
    a, b = StoreSource(s1), StoreSource(s2)
    a.refresh()
    b.refresh()
    pump(Reconciler(a.eset, True, Config()), Reconciler(b.eset, False, Config()))
    for s in (s1, s2):
        assert s.front(f1)[0] == 12 and s.front(f2)[0] == 7 and s.front(both)[0] == 9
    assert s1.entry(both, 9) == s2.entry(both, 9)
    # incremental refresh: nothing new to hash
    assert a.refresh() == 0


def _chained_feed(store, seed, sizes):
    """A feed of chain20 entries with side chains, written with the core's Author."""
    from tinyssb import entry
    sk = SigningKey(hashlib.sha256(seed).digest())
    a = entry.Author(bytes(sk.verify_key), lambda m: sk.sign(m).signature)
    store.add_feed(a.fid)
    for size in sizes:
        seq, pkt, mid, chunks = a.next(bytes((i * 13) & 0xFF for i in range(size)))
        store.append(a.fid, seq, pkt, mid)
        for k, c in enumerate(chunks):
            store.put_chunk(a.fid, seq, k, c)
    return a.fid


def test_side_chains_travel_as_chunk_elements():
    s1, s2 = MemStore(), MemStore()
    fid = _chained_feed(s1, b"chains", (20, 300, 1000, 40))
    a, b = StoreSource(s1), StoreSource(s2)
    assert a.refresh() == 4 + 3 + 10 + 1
    b.refresh()
    pump(Reconciler(a.eset, True, Config()), Reconciler(b.eset, False, Config()))
    for seq in range(1, 5):
        assert s2.entry(fid, seq) == s1.entry(fid, seq)
        assert s2.chunk_count(fid, seq) == s1.chunk_count(fid, seq)
        for k in range(s1.chunk_count(fid, seq)):
            assert s2.chunk(fid, seq, k) == s1.chunk(fid, seq, k)
    assert b.bad_chunks == 0


def test_chunk_with_wrong_hash_is_not_stored():
    from tssb.setu.tinyssb_elements import make_chunk_element
    s1, s2 = MemStore(), MemStore()
    fid = _chained_feed(s1, b"bad", (300,))
    b = StoreSource(s2)
    b.refresh()
    a = StoreSource(s1)
    a.refresh()
    entry_el = [d for d in a.eset.elements.values() if len(d) == 176][0]
    b.eset.add(entry_el)
    forged = make_chunk_element(fid, 1, 0, bytes(120))
    assert check_element(forged)          # shape is fine ...
    b.eset.add(forged)
    assert s2.chunk_count(fid, 1) == 0    # ... but its hash is not the entry's pointer
    assert b.bad_chunks == 1
    good = make_chunk_element(fid, 1, 0, s1.chunk(fid, 1, 0))
    b.eset.add(good)
    assert s2.chunk_count(fid, 1) == 1
