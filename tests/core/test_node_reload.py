# Node.reload: a second writer of the node's store (another process of a host) appended
# entries and chunks; the node takes them up and sends them on.
from tinyssb import crypto, entry
from tinyssb.store import MemStore
from support import converge, identity, make_node


def _write(store, who, contents):
    """Append contents as author `who` straight into the store (not through a node)."""
    seed, fid = identity(who)
    store.add_feed(fid)
    seq, prev = store.front(fid)
    author = entry.Author(fid, lambda m: crypto.sign(seed, m), seq, prev)
    for c in contents:
        s, pkt, mid, chunks = author.next(c)
        store.append(fid, s, pkt, mid)
        for i, ch in enumerate(chunks):
            store.put_chunk(fid, s, i, ch)
    return fid


def test_reload_takes_up_entries_written_beside_the_node():
    store = MemStore()
    a = make_node(identity(1), store=store)
    fid = _write(store, 7, [b"one", b"two " * 40])
    assert fid not in a.replicas
    assert a.reload(fid)                     # a stored feed it did not replicate yet
    assert a.replicas[fid].max_seq == 2
    assert not a.reload(fid)                 # nothing new since
    _write(store, 7, [b"three"])
    assert a.reload(fid) and a.replicas[fid].max_seq == 3
    b = make_node(rand_seed=2)
    b.follow(fid)
    converge([a, b])
    assert b.store.front(fid) == store.front(fid)


def test_reload_of_the_own_feed_continues_it_and_sends_it_on():
    store = MemStore()
    a = make_node(identity(1), store=store)
    b = make_node(rand_seed=2)
    own = identity(1)[1]
    b.follow(own)
    a.post(b"first")
    converge([a, b])
    _write(store, 1, [b"posted by another writer"])   # same key, same store
    assert a.reload(own) and a.author.seq == 2
    assert a.post(b"third") == 3                      # on top, not a second seq 2
    converge([a, b])
    assert b.store.front(own) == store.front(own) and b.store.front(own)[0] == 3
