"""Flash store: interface behaviour, recovery after a cut at every byte, capacity."""
import os
import shutil
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from tinyssb.store import MemStore
from tssbfw.flashstore import CHUNK_REC, ENTRY_REC, FlashStore, StoreFull

FID = bytes(range(32))
FID2 = bytes(range(1, 33))


def pkt(seq, tag=0):
    return bytes([(seq * 7 + tag + i) % 256 for i in range(120)])


def mid(seq):
    return bytes([seq % 256]) * 20


class Events:
    def __init__(self):
        self.items = []

    def emit(self, event, **fields):
        self.items.append((event, fields))


def filled(root, n_entries=5, n_chunks=3):
    s = FlashStore(root)
    s.add_feed(FID)
    for q in range(1, n_entries + 1):
        s.append(FID, q, pkt(q), mid(q))
    for c in range(n_chunks):
        s.put_chunk(FID, 2, c, pkt(100 + c, 1))
    return s


def test_round_trip_and_reopen(tmp_path):
    root = str(tmp_path / "feeds")
    s = filled(root)
    assert s.front(FID) == (5, mid(5))
    assert s.bytes_written == 5 * ENTRY_REC + 3 * CHUNK_REC
    s2 = FlashStore(root)
    assert s2.feeds() == [FID]
    assert s2.front(FID) == (5, mid(5))
    assert [s2.entry(FID, q) for q in range(1, 6)] == [pkt(q) for q in range(1, 6)]
    assert s2.entry(FID, 0) is None and s2.entry(FID, 6) is None
    assert s2.chunk_count(FID, 2) == 3 and s2.chunk_count(FID, 3) == 0
    assert s2.chunk(FID, 2, 2) == pkt(102, 1) and s2.chunk(FID, 2, 3) is None
    assert s2.recovered == {}


def test_empty_feed_front_is_fid_prefix(tmp_path):
    s = FlashStore(str(tmp_path))
    s.add_feed(FID)
    s.add_feed(FID)
    assert s.front(FID) == (0, FID[:20])
    assert FlashStore(str(tmp_path)).front(FID) == (0, FID[:20])


def test_order_and_length_checks(tmp_path):
    s = FlashStore(str(tmp_path))
    s.add_feed(FID)
    with pytest.raises(ValueError):
        s.append(FID, 2, pkt(2), mid(2))
    with pytest.raises(ValueError):
        s.append(FID, 1, pkt(1)[:119], mid(1))
    with pytest.raises(ValueError):
        s.put_chunk(FID, 1, 1, pkt(1))
    with pytest.raises(ValueError):
        s.add_feed(b"short")
    with pytest.raises(KeyError):
        s.append(FID2, 1, pkt(1), mid(1))
    assert s.used == 0


def _cut_cases(path, last_records, rec):
    size = os.path.getsize(path)
    return range(size - last_records * rec, size + 1)


@pytest.mark.parametrize("which,rec,count", [("log", ENTRY_REC, 5), ("chain", CHUNK_REC, 3)])
def test_cut_at_every_byte_of_the_last_records(tmp_path, which, rec, count):
    base = str(tmp_path / "base")
    filled(base)
    fdir = os.path.join(base, FID.hex())
    with open(os.path.join(fdir, which), "rb") as f:
        full = f.read()
    for cut in range(len(full) - 3 * rec, len(full) + 1):
        root = str(tmp_path / ("c%d" % cut))
        shutil.copytree(base, root)
        with open(os.path.join(root, FID.hex(), which), "wb") as f:
            f.write(full[:cut])
        s = FlashStore(root)
        keep = cut // rec
        if which == "log":
            assert s.front(FID) == (keep, mid(keep) if keep else FID[:20])
            assert [s.entry(FID, q) for q in range(1, keep + 1)] == \
                [pkt(q) for q in range(1, keep + 1)]
            assert s.chunk_count(FID, 2) == 3
            nxt = keep + 1
            s.append(FID, nxt, pkt(nxt), mid(nxt))       # appends go on cleanly
            again = FlashStore(root)
            assert again.front(FID) == (nxt, mid(nxt)) and again.recovered == {}
        else:
            assert s.front(FID) == (5, mid(5))
            assert s.chunk_count(FID, 2) == keep
            assert [s.chunk(FID, 2, c) for c in range(keep)] == \
                [pkt(100 + c, 1) for c in range(keep)]
            s.put_chunk(FID, 2, keep, pkt(100 + keep, 1))
            again = FlashStore(root)
            assert again.chunk_count(FID, 2) == keep + 1 and again.recovered == {}
        assert os.path.getsize(os.path.join(root, FID.hex(), which)) == \
            (keep + 1) * rec
        assert s.used == again.used
        shutil.rmtree(root)


def test_bit_flip_in_a_record_drops_it_and_what_follows(tmp_path):
    root = str(tmp_path)
    filled(root)
    path = os.path.join(root, FID.hex(), "log")
    with open(path, "r+b") as f:
        f.seek(3 * ENTRY_REC + 50)      # inside entry 4
        b = f.read(1)
        f.seek(3 * ENTRY_REC + 50)
        f.write(bytes([b[0] ^ 1]))
    s = FlashStore(root)
    assert s.front(FID) == (3, mid(3))
    assert s.recovered == {path: 2 * ENTRY_REC}


def test_sequence_gap_is_not_accepted(tmp_path):
    root = str(tmp_path)
    filled(root)
    path = os.path.join(root, FID.hex(), "log")
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:           # drop entry 2: 3, 4, 5 no longer continue
        f.write(data[:ENTRY_REC] + data[2 * ENTRY_REC:])
    assert FlashStore(root).front(FID) == (1, mid(1))


def test_interrupted_cut_back_is_settled(tmp_path):
    root = str(tmp_path)
    filled(root)
    path = os.path.join(root, FID.hex(), "log")
    # crash while copying: a partial .tmp next to the intact original
    with open(path + ".tmp", "wb") as f:
        f.write(b"partial")
    assert FlashStore(root).front(FID) == (5, mid(5))
    assert not os.path.exists(path + ".tmp")
    # crash after removing the original: the finished copy is alone
    os.rename(path, path + ".tmp")
    assert FlashStore(root).front(FID) == (5, mid(5))
    assert os.path.exists(path) and not os.path.exists(path + ".tmp")


def test_full_store_refuses_keeps_data_and_reports_once(tmp_path):
    ev = Events()
    cap = 3 * ENTRY_REC + CHUNK_REC
    s = FlashStore(str(tmp_path), capacity=cap, events=ev)
    s.add_feed(FID)
    for q in (1, 2, 3):
        s.append(FID, q, pkt(q), mid(q))
    for _ in range(3):
        with pytest.raises(StoreFull) as e:
            s.append(FID, 4, pkt(4), mid(4))
        assert e.value.reason == "bytes"
    s.put_chunk(FID, 1, 0, pkt(9))          # a smaller record still fits
    with pytest.raises(StoreFull):
        s.put_chunk(FID, 1, 1, pkt(10))
    full = [f for e, f in ev.items if e == "store_full"]
    assert len(full) == 1     # one clear event per feed, not one per refused write
    assert full[0]["feed"] == FID.hex() and full[0]["reason"] == "bytes"
    assert s.front(FID) == (3, mid(3)) and s.used == cap
    again = FlashStore(str(tmp_path), capacity=cap)
    assert again.front(FID) == (3, mid(3)) and again.chunk_count(FID, 1) == 1


def test_max_feeds(tmp_path):
    ev = Events()
    s = FlashStore(str(tmp_path), max_feeds=2, events=ev)
    s.add_feed(FID)
    s.add_feed(FID2)
    with pytest.raises(StoreFull) as e:
        s.add_feed(bytes(32))
    assert e.value.reason == "feeds"
    assert ev.items[0][0] == "store_full" and ev.items[0][1]["reason"] == "feeds"
    assert sorted(FlashStore(str(tmp_path)).feeds()) == sorted([FID, FID2])


def test_foreign_files_are_ignored(tmp_path):
    os.mkdir(str(tmp_path / "notafeed"))
    (tmp_path / ("zz" * 32)).mkdir()
    assert FlashStore(str(tmp_path)).feeds() == []


ops = st.lists(st.tuples(st.sampled_from(["append", "chunk", "reopen"]),
                         st.sampled_from([FID, FID2]), st.integers(1, 4)), max_size=40)


@settings(max_examples=40, deadline=None)
@given(ops)
def test_behaves_like_memstore(tmp_path_factory, script):
    root = str(tmp_path_factory.mktemp("fs"))
    fs, ms = FlashStore(root), MemStore()
    for s in (fs, ms):
        s.add_feed(FID)
        s.add_feed(FID2)
    for op, fid, k in script:
        if op == "reopen":
            fs = FlashStore(root)
            continue
        for s in (fs, ms):
            if op == "append":
                q = s.front(fid)[0] + 1
                s.append(fid, q, pkt(q, k), mid(q + k))
            else:
                seq = k
                s.put_chunk(fid, seq, s.chunk_count(fid, seq), pkt(seq, k))
    for fid in (FID, FID2):
        assert fs.front(fid) == ms.front(fid)
        n = ms.front(fid)[0]
        assert [fs.entry(fid, q) for q in range(n + 2)] == [ms.entry(fid, q) for q in range(n + 2)]
        for seq in range(1, 5):
            assert fs.chunk_count(fid, seq) == ms.chunk_count(fid, seq)
            assert [fs.chunk(fid, seq, c) for c in range(6)] == \
                [ms.chunk(fid, seq, c) for c in range(6)]


MPY = os.path.join(os.path.dirname(sys.executable), "micropython")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.skipif(not os.path.exists(MPY), reason="MicroPython unix port not installed")
def test_cut_recovery_under_micropython(tmp_path):
    r = subprocess.run([MPY, "tests/firmware/mpy_flashstore_cut.py", str(tmp_path / "w")],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "CUT ok %d" % (2 * ENTRY_REC + 1) in r.stdout, \
        r.stdout + r.stderr
