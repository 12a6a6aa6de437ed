"""DAG message format, element validation and admission (children known first)."""
import random

import pytest

from tinyssb import bipf, entry
from tinyssb.store import MemStore
from tssb.trdag import dagstore, message
from tssb.trdag.errors import TrdagError

from dagutil import author, grow, new_dag


def test_element_roundtrip_with_side_chain():
    idx, root, authors = new_dag(3)
    m = dagstore.post(idx, authors[1], root, "x" * 700)   # needs several chunks
    assert len(m.chunks) >= 7
    p = message.parse_element(m.element())
    assert (p.mid, p.root, p.depth, p.children, p.text) == (m.mid, root, 1, (root,), "x" * 700)


@pytest.mark.parametrize("where,reason", [(60, "bad_message"), (130, "bad_message"),
                                          (200, "bad_message"), (-1, "bad_message")])
def test_tampered_element_is_rejected(where, reason):
    idx, root, authors = new_dag(4)
    el = bytearray(dagstore.post(idx, authors[0], root, "y" * 300).element())
    el[where] ^= 1         # DMX / signature / chunk data / last chunk pointer
    with pytest.raises(TrdagError) as e:
        message.parse_element(bytes(el))
    assert e.value.reason == reason


def test_element_length_checked():
    idx, root, authors = new_dag(5)
    el = dagstore.post(idx, authors[0], root, "z").element()
    for bad in (el[:-1], el + bytes(120), b"", el[:100]):
        with pytest.raises(TrdagError):
            message.parse_element(bad)


def _signed(content, rng):
    a = author(rng)
    seq, pkt, mid, chunks = a.next(content)
    return b"".join([a.fid, seq.to_bytes(4, "big"), entry.genesis_prev(a.fid), pkt] + chunks)


@pytest.mark.parametrize("content", [
    ["tdag", None, [b"a" * 20], 0, "root with child"],
    ["tdag", b"r" * 20, [], 1, "no children"],
    ["tdag", b"r" * 20, [b"a" * 20, b"a" * 20], 1, "dup child"],
    ["tdag", b"r" * 20, [b"short"], 1, "short child"],
    ["tdag", b"r" * 20, [b"a" * 20], -1, "negative depth"],
    ["chat", None, [], 0, "other app"],
    ["tdag", b"r" * 20, [b"a" * 20] * 0 + [bytes([i]) * 20 for i in range(33)], 1, "too many"],
])
def test_bad_content_is_rejected(content):
    el = _signed(bipf.encode(content), random.Random(9))
    with pytest.raises(TrdagError) as e:
        message.parse_element(el)
    assert e.value.reason == "bad_content"


def test_admission_waits_for_children_and_checks_depth():
    rng = random.Random(2)
    src, root, authors = new_dag(6)
    msgs = grow(src, root, authors, 20, rng)
    dst = dagstore.MemDagIndex()
    dag = dagstore.Dag(dst)
    dag.offer(src.get(root))
    for m in reversed(msgs):                 # newest first: all but the first must wait
        got = dag.offer(m)
        if m is msgs[0]:
            assert [g.mid for g in got] == [g.mid for g in msgs]   # the cascade, in order
        else:
            assert got == [] and m.mid in dag.pending
    assert not dag.pending
    assert sorted(dst.members(root)) == sorted(src.members(root))


def test_wrong_depth_never_enters_the_index():
    rng = random.Random(3)
    src, root, authors = new_dag(7)
    a = authors[2]
    liar = message.create(a, root, [root], 5, "I claim depth 5")
    dst = dagstore.MemDagIndex()
    dag = dagstore.Dag(dst)
    dag.offer(src.get(root))
    with pytest.raises(TrdagError) as e:
        dag.offer(liar)
    assert e.value.reason == "bad_depth" and not dst.has(liar.mid)


def test_pending_pool_is_bounded():
    rng = random.Random(4)
    src, root, authors = new_dag(8)
    msgs = grow(src, root, authors, 6, rng)
    dag = dagstore.Dag(dagstore.MemDagIndex(), max_pending=3)
    for m in reversed(msgs[2:5]):
        dag.offer(m)
    with pytest.raises(TrdagError) as e:
        dag.offer(msgs[1])
    assert e.value.reason == "pending_full"


def test_admitted_messages_continue_feeds_in_the_store():
    rng = random.Random(5)
    src, root, authors = new_dag(9, n_authors=2)
    msgs = grow(src, root, authors, 12, rng)
    store = MemStore()
    dag = dagstore.Dag(dagstore.MemDagIndex(), feeds=store)
    for m in [src.get(root)] + msgs[::-1]:
        dag.offer(m)
    for a in authors:
        top, front = store.front(a.fid)
        assert (top, front) == (a.seq, a.prev)        # whole feed arrived, in order
        for s in range(1, top + 1):
            m = src.by_feed(a.fid, s)
            assert store.entry(a.fid, s) == m.pkt
            assert store.chunk_count(a.fid, s) == len(m.chunks)


def test_sqlite_index_matches_memory(tmp_path):
    rng = random.Random(6)
    mem, root, authors = new_dag(10)
    msgs = grow(mem, root, authors, 15, rng)
    sq = dagstore.SqliteDagIndex.open(str(tmp_path / "d.sqlite"))
    dag = dagstore.Dag(sq)
    for m in [mem.get(root)] + msgs:
        dag.offer(m)
    assert sorted(sq.members(root)) == sorted(mem.members(root))
    assert sorted(sq.tips(root)) == sorted(mem.tips(root))
    assert sq.roots() == [root]
    m = sq.get(msgs[-1].mid)
    assert m.element() == msgs[-1].element()
    assert sq.by_feed(m.fid, m.seq).mid == m.mid
