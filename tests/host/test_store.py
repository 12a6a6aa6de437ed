"""Host SQLite store: the feed-store interface (against MemStore), durability, migrations,
and the host tables (identities, peers, config, GOSET keys)."""
import random

import pytest

from tinyssb.store import MemStore
from tssb import store as store_mod
from tssb.store import Store, StoreError, open_store


def fid(i):
    return bytes([i]) * 32


def pkt(fid_i, seq):
    return bytes([fid_i, seq & 0xFF]) * 60


def mid(fid_i, seq):
    return bytes([seq & 0xFF, fid_i]) * 10


@pytest.fixture
def st(tmp_path):
    s = open_store(str(tmp_path))
    yield s
    s.close()


def test_same_answers_as_memstore(st):
    """A random sequence of operations gives the same results on both stores."""
    rng = random.Random(7)
    mem = MemStore()
    for _ in range(400):
        f = rng.randrange(4)
        op = rng.randrange(4)
        if op == 0:
            st.add_feed(fid(f))
            mem.add_feed(fid(f))
        elif op == 1 and mem.has_feed(fid(f)):
            top, _ = mem.front(fid(f))
            seq = top + 1
            st.append(fid(f), seq, pkt(f, seq), mid(f, seq))
            mem.append(fid(f), seq, pkt(f, seq), mid(f, seq))
        elif op == 2 and mem.has_feed(fid(f)):
            top, _ = mem.front(fid(f))
            if top:
                seq = rng.randrange(1, top + 1)
                n = mem.chunk_count(fid(f), seq)
                c = bytes([n]) * 120
                st.put_chunk(fid(f), seq, n, c)
                mem.put_chunk(fid(f), seq, n, c)
        for g in range(4):
            assert st.has_feed(fid(g)) == mem.has_feed(fid(g))
            if mem.has_feed(fid(g)):
                assert st.front(fid(g)) == mem.front(fid(g))
                top = mem.front(fid(g))[0]
                for seq in range(0, top + 2):
                    assert st.entry(fid(g), seq) == mem.entry(fid(g), seq)
                    assert st.chunk_count(fid(g), seq) == mem.chunk_count(fid(g), seq)
                    for cnr in range(-1, mem.chunk_count(fid(g), seq) + 1):
                        assert st.chunk(fid(g), seq, cnr) == mem.chunk(fid(g), seq, cnr)
    assert sorted(st.feeds()) == sorted(mem.feeds())


def test_empty_feed_front_is_fid_prefix_and_unknown_feed_raises(st):
    st.add_feed(fid(1))
    assert st.front(fid(1)) == (0, fid(1)[:20])
    with pytest.raises(KeyError):
        st.front(fid(2))


def test_append_rules(st):
    st.add_feed(fid(1))
    with pytest.raises(StoreError):
        st.append(fid(1), 2, pkt(1, 2), mid(1, 2))          # gap
    st.append(fid(1), 1, pkt(1, 1), mid(1, 1))
    with pytest.raises(StoreError):
        st.append(fid(1), 1, pkt(1, 1), mid(1, 1))          # duplicate
    with pytest.raises(StoreError):
        st.append(fid(1), 2, b"short", mid(1, 2))           # size
    with pytest.raises(StoreError):
        st.append(fid(1), 2, pkt(1, 2), b"x" * 19)
    with pytest.raises(KeyError):
        st.append(fid(3), 1, pkt(3, 1), mid(3, 1))          # unknown feed
    with pytest.raises(StoreError):
        st.put_chunk(fid(1), 1, 1, bytes(120))              # chunk gap
    with pytest.raises(StoreError):
        st.add_feed(b"\x01" * 31)
    assert st.front(fid(1)) == (1, mid(1, 1))


def test_survives_reopen(tmp_path):
    s = open_store(str(tmp_path))
    s.add_feed(fid(5))
    with s.transaction():
        for seq in range(1, 51):
            s.append(fid(5), seq, pkt(5, seq), mid(5, seq))
    s.put_chunk(fid(5), 3, 0, bytes(range(120)))
    s.close()
    s = open_store(str(tmp_path))
    assert s.front(fid(5)) == (50, mid(5, 50))
    assert s.entry(fid(5), 17) == pkt(5, 17)
    assert s.chunk(fid(5), 3, 0) == bytes(range(120))
    assert s._q("PRAGMA journal_mode")[0][0] == "wal"
    s.close()


def test_transaction_rolls_back_as_a_whole(st):
    st.add_feed(fid(1))
    with pytest.raises(RuntimeError):
        with st.transaction():
            st.append(fid(1), 1, pkt(1, 1), mid(1, 1))
            with st.transaction():   # nested: joins the outer one
                st.append(fid(1), 2, pkt(1, 2), mid(1, 2))
            raise RuntimeError("power cut")
    assert st.front(fid(1)) == (0, fid(1)[:20])
    st.append(fid(1), 1, pkt(1, 1), mid(1, 1))
    assert st.front(fid(1))[0] == 1


def test_migrations_run_once_in_order(tmp_path, monkeypatch):
    monkeypatch.setattr(store_mod, "MIGRATIONS", list(store_mod.MIGRATIONS))
    s = open_store(str(tmp_path))
    base = s.schema_version()
    s.add_feed(fid(1))
    s.close()
    store_mod.register_migration(base + 1, "CREATE TABLE extra (k INTEGER PRIMARY KEY, v TEXT)")
    with pytest.raises(StoreError):
        store_mod.register_migration(base + 5, "SELECT 1")
    s = open_store(str(tmp_path))
    assert s.schema_version() == base + 1
    s._q("INSERT INTO extra VALUES (1, 'a')")
    assert s.has_feed(fid(1))           # old data kept
    s.close()
    s = open_store(str(tmp_path))       # reopening does not re-run the step
    assert s._q("SELECT v FROM extra") == [("a",)]
    s.close()


def test_failed_migration_leaves_previous_version(tmp_path, monkeypatch):
    monkeypatch.setattr(store_mod, "MIGRATIONS", list(store_mod.MIGRATIONS))
    s = open_store(str(tmp_path))
    base = s.schema_version()
    s.close()
    store_mod.register_migration(base + 1, "CREATE TABLE t2 (a); INSERT INTO nowhere VALUES (1)")
    with pytest.raises(Exception):
        open_store(str(tmp_path))
    monkeypatch.setattr(store_mod, "MIGRATIONS", store_mod.MIGRATIONS[:-1])
    s = open_store(str(tmp_path))
    assert s.schema_version() == base
    assert s._q("SELECT name FROM sqlite_master WHERE name='t2'") == []
    s.close()


def test_peers_config_identity_goset(st):
    a, b = b"\xaa" * 32, b"\xbb" * 32
    assert st.add_peer(a, "alpha", "10.0.0.1:8008") is True
    assert st.add_peer(a, "alpha2", "10.0.0.1:8009") is False     # update
    st.add_peer(b)
    assert st.is_peer(a) and st.is_peer(b) and not st.is_peer(b"\xcc" * 32)
    assert [p["public"] for p in st.peers()] == [b, a]             # by name, "" first
    assert st.peer_by_addr("10.0.0.1:8009") == a
    assert st.peer_by_addr("10.0.0.1:8008") is None
    assert st.remove_peer(a) and not st.remove_peer(a)
    with pytest.raises(StoreError):
        st.add_peer(b"\x01" * 5)
    assert st.get_config("x", 7) == 7
    st.set_config("x", b"\x01\x02")
    assert st.get_config("x") == b"\x01\x02"
    assert st.identity() is None
    st.set_identity(b"\x01" * 32, b"\x02" * 32)
    assert st.identity() == (b"\x01" * 32, b"\x02" * 32)
    st.add_goset_key(fid(9))
    st.add_goset_key(fid(3))
    st.add_goset_key(fid(9))
    assert st.goset_keys() == [fid(3), fid(9)]
    st.remove_goset_key(fid(3))
    assert st.goset_keys() == [fid(9)]


def test_context_creates_identity_network_key_and_event_log(tmp_path):
    import json
    from tssb.context import Context
    home = str(tmp_path / "home")
    ctx = Context.open(home)
    pub, key = ctx.identity.public, ctx.network_key
    assert len(pub) == 32 and len(key) == 32
    eid = ctx.events.emit("sync_start", proto="setu", peer=b"\x01" * 32)
    ctx.close()
    ctx = Context.open(home)                       # same identity and key on reopen
    assert ctx.identity.public == pub and ctx.network_key == key
    with open(ctx.events.path) as f:
        rec = json.loads(f.readline())
    assert rec["id"] == eid and rec["v"] == 1 and rec["event"] == "sync_start"
    assert rec["peer"] == "01" * 32 and rec["node"] == ctx.events.node
    with pytest.raises(ValueError):
        ctx.events.emit("no_such_event")
    ctx.close()
    other = Context.open(str(tmp_path / "other"))  # a fresh deployment gets its own key
    assert other.network_key != key
    other.close()
    with pytest.raises(FileNotFoundError):
        Context.open(str(tmp_path / "none"), create=False)


def test_db_property_is_the_connection_and_read_only(st, tmp_path):
    st.db.execute("CREATE TABLE extra (x INTEGER)")
    st.db.execute("INSERT INTO extra VALUES (5)")                 # autocommit: visible to others
    other = open_store(str(tmp_path))
    assert other.db.execute("SELECT x FROM extra").fetchall() == [(5,)]
    other.close()
    with pytest.raises(AttributeError):
        st.db = None
    st.add_feed(fid(1))
    assert st.db.execute("SELECT COUNT(*) FROM feeds").fetchone() == (1,)
