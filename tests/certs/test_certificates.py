"""Certificates verify for every feed length and message; sizes stay O(log n)."""
import sqlite3

import pytest

from conftest import ED25519, FAST, Feed
from tssb.certs import CertError, CertLog, MemRecords, SqliteRecords, verify
from tssb.certs import certificate as cm
from tssb.certs import flattree as ft
from tssb.certs.certlog import entry_mid
from tssb.certs.records import Record

N = 1024
SAMPLE_LENGTHS = [255, 256, 257, 511, 512, 513, 700, 1000, 1023, 1024]


def size_bound(anchor):
    """O(log n): per bit of the anchor at most one sibling, one root and one record."""
    return cm.HEADER_LEN + (2 * 20 + cm.REC_LEN) * anchor.bit_length()


def check_cert(feed, raw, seq, anchor, scheme=FAST):
    v = verify(raw, scheme, fid=feed.fid)
    assert (v.seq, v.anchor) == (seq, anchor)
    assert v.pkt == feed.store.entry(feed.fid, seq)
    assert v.mid == feed.log.mid(seq)
    assert v.facts[("node", ft.leaf(seq - 1))] == v.mid
    # property 1: the roots of the anchor's forest (all of entries 1..anchor) are pinned
    for pos in v.root_positions():
        assert v.facts[pos] == feed.log.node(pos[1])
    assert len(raw) == cm.cert_len(seq, anchor) <= size_bound(anchor)
    return v


def test_every_length_every_message_default_form():
    feed = Feed(b"\x02" * 32)
    verified = {}
    for n in range(1, N + 1):
        feed.grow(1)
        assert feed.log.front() == n
        for s in range(1, n + 1):
            anchor = feed.log.default_anchor(s)
            p = cm.next_pow2(s)
            assert anchor == (p if p <= n else s)  # compact once grown to 2^k, else bridging
            if (s, anchor) not in verified:       # records are append-only: same bytes later
                raw = feed.cert(s, anchor)
                check_cert(feed, raw, s, anchor)
                verified[(s, anchor)] = raw
    assert len(verified) == N + sum(1 for s in range(1, N + 1) if s & (s - 1))
    # the earlier-built certificates are byte-identical when rebuilt from the full feed
    for (s, anchor), raw in list(verified.items())[::37]:
        assert feed.cert(s, anchor) == raw


def test_anchored_form_every_message(feed1024):
    lengths = list(range(1, 97)) + SAMPLE_LENGTHS
    for n in lengths:
        for s in range(1, n + 1):
            raw = feed1024.cert(s, n)
            v = check_cert(feed1024, raw, s, n)
            assert v.form == cm.form_of(s, n)


def test_forms_and_sizes(feed1024):
    v = verify(feed1024.cert(7, 7), FAST)
    assert v.form == cm.BRIDGING and len(v.cert.records) == 2  # roots 1-4, 5-6, 7
    v = verify(feed1024.cert(7, 8), FAST)
    assert v.form == cm.COMPACT and len(v.cert.records) == 1 and len(v.cert.siblings) == 3
    # the worst bridging case n = 2^k - 1 has k roots and k-1 records
    assert cm.layout(1023, 1023) == (0, 10, 9)
    assert cm.layout(1, 1024) == (10, 1, 1)
    assert cm.cert_len(1, 1024) < cm.cert_len(1023, 1023)
    assert cm.cert_len(0xFFFFFFFF, 0xFFFFFFFF) <= cm.MAX_CERT_LEN


def test_ed25519_feed_every_message():
    feed = Feed(b"\x03" * 32, scheme=ED25519).grow(70)
    for s in range(1, 71):
        for anchor in {s, feed.log.default_anchor(s), 70}:
            check_cert(feed, feed.cert(s, anchor), s, anchor, scheme=ED25519)
    with pytest.raises(CertError) as e:
        verify(feed.cert(5), FAST)  # the signature is under test: a wrong scheme fails
    assert e.value.reason == "bad_entry"
    with pytest.raises(CertError) as e:
        verify(feed.cert(5), ED25519, fid=bytes(32))
    assert e.value.reason == "wrong_feed"


def test_sqlite_records_match_memory_and_persist(tmp_path):
    path = str(tmp_path / "certs.db")
    db = sqlite3.connect(path, isolation_level=None)
    mem = Feed(b"\x04" * 32).grow(300)
    sql = Feed(b"\x04" * 32, records=SqliteRecords(db))
    sql.store = mem.store
    sql.log.certify(sql.store, sql.seed, batch=64)
    for s in (1, 2, 3, 100, 255, 256, 257, 300):
        for anchor in (s, 300):
            assert sql.cert(s, anchor) == mem.cert(s, anchor)
    db.close()
    db = sqlite3.connect(path, isolation_level=None)
    again = CertLog(SqliteRecords(db), mem.fid, FAST)
    assert again.front() == 300
    assert again.certificate(mem.store, 77, 300).encode() == mem.cert(77, 300)
    db.execute("UPDATE cert_records SET rec = substr(rec, 1, 30) WHERE seq = 64")
    with pytest.raises(CertError) as e:
        again.record(64)
    assert e.value.reason == "bad_record"


def test_replica_ingests_records_and_serves_same_certificates(feed1024):
    replica = CertLog(MemRecords(), feed1024.fid, FAST)
    for seq in range(1, 200):
        replica.ingest(feed1024.log.record(seq), feed1024.store.entry(feed1024.fid, seq))
    assert replica.certificate(feed1024.store, 150, 199).encode() == feed1024.cert(150, 199)
    rec = feed1024.log.record(200)
    pkt = feed1024.store.entry(feed1024.fid, 200)
    bad = Record(200, [rec.hashes[0][:-1] + b"\0"] + rec.hashes[1:], rec.bridge, rec.sig)
    for r, reason in ((bad, "bad_record"),
                      (Record(200, rec.hashes, rec.bridge, bytes(64)), "bad_signature"),
                      (feed1024.log.record(201), "out_of_order")):
        with pytest.raises(CertError) as e:
            replica.ingest(r, pkt)
        assert e.value.reason == reason
    with pytest.raises(CertError) as e:
        replica.ingest(rec, feed1024.store.entry(feed1024.fid, 201))  # wrong entry
    assert e.value.reason == "bad_record"
    replica.ingest(rec, pkt)
    assert replica.front() == 200


def test_record_stream_format_roundtrip_and_bounds(feed1024):
    for seq in range(1, 130):
        rec = feed1024.log.record(seq)
        raw = rec.encode()
        assert Record.decode(raw) == rec
        with pytest.raises(CertError):
            Record.decode(raw[:-1])
        with pytest.raises(CertError):
            Record.decode(raw + b"\0")
    with pytest.raises(CertError):
        Record.decode(bytes(4) + bytes(84))  # seq 0


def test_certify_needs_the_feed_key_and_ranges(feed1024):
    with pytest.raises(CertError) as e:
        feed1024.log.certify(feed1024.store, b"\x09" * 32)
    assert e.value.reason == "wrong_key"
    for seq, anchor in ((0, 5), (6, 5), (5, 1025)):
        with pytest.raises(CertError):
            feed1024.log.certificate(feed1024.store, seq, anchor)
    assert entry_mid(feed1024.fid, 1, feed1024.fid[:20],
                     feed1024.store.entry(feed1024.fid, 1)) == feed1024.log.mid(1)
