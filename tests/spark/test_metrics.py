"""Each metric on a small hand-computed scenario (times are ms offsets from T0)."""
import datetime

from pyspark.testing import assertDataFrameEqual

from scenario import Scenario, T0, events_df, hexid
from tssb_spark import metrics as M

H = 3600 * 1000
HOUR0 = datetime.datetime(2025, 1, 1, 0, 0)  # session time zone is UTC


def _ev(spark, sc):
    return events_df(spark, sc.all_lines())


def test_airtime_and_duty_cycle_per_node_hour(spark):
    sc = Scenario()
    sc.emit("a", 0, "tx", kind="entry", length=120, airtime_ms=100.0)
    sc.emit("a", 30 * 60000, "tx", kind="entry", length=120, airtime_ms=200.0)
    sc.emit("a", H + 15 * 60000, "tx", kind="goset", length=105, airtime_ms=50.0)
    sc.emit("b", 5 * 60000, "tx", kind="entry", length=120, airtime_ms=36000.0,
            freq_khz=868100)
    sc.emit("b", 6 * 60000, "rx", kind="entry", length=120, airtime_ms=999.0)  # not a tx
    got = M.airtime_hourly(_ev(spark, sc))
    assert [r["freq_khz"] for r in got.collect()] == [None, None, 868100]
    got = got.drop("freq_khz")
    exp = spark.createDataFrame([
        ("a", HOUR0, 2, 300.0, 300.0 / H),
        ("a", HOUR0 + datetime.timedelta(hours=1), 1, 50.0, 50.0 / H),
        ("b", HOUR0, 1, 36000.0, 0.01),
    ], "node string, hour timestamp, tx_count long, airtime_ms double, duty_cycle double")
    assertDataFrameEqual(got, exp)


def test_delivery_ratio_per_link(spark):
    sc = Scenario()
    p = {i: ("%x" % i) * 16 for i in range(1, 8)}
    sc.emit("a", 0, "tx", kind="entry", length=120, pkt=p[1], airtime_ms=1.0)
    sc.emit("b", 100, "rx", kind="entry", length=120, pkt=p[1], rssi=-100.0, snr=2.0)
    sc.emit("c", 200, "rx", kind="entry", length=120, pkt=p[1], src="a")
    sc.emit("a", 20000, "tx", kind="entry", length=120, pkt=p[2], airtime_ms=1.0)
    sc.emit("b", 20100, "rx", kind="entry", length=120, pkt=p[2], rssi=-110.0, snr=-1.0)
    sc.emit("a", 40000, "tx", kind="entry", length=120, pkt=p[3], airtime_ms=1.0)
    sc.emit("c", 40000 + 15001, "rx", kind="entry", length=120, pkt=p[3])   # too late
    # p4 sent by b, then relayed by c: each rx goes to the latest tx before it.
    sc.emit("b", 60000, "tx", kind="entry", length=120, pkt=p[4], airtime_ms=1.0)
    sc.emit("a", 60030, "rx", kind="entry", length=120, pkt=p[4])
    sc.emit("c", 60050, "tx", kind="entry", length=120, pkt=p[4], airtime_ms=1.0)
    sc.emit("a", 60150, "rx", kind="entry", length=120, pkt=p[4])
    # p5 sent by a and b; c names the source, so the older tx of a wins.
    sc.emit("a", 80000, "tx", kind="entry", length=120, pkt=p[5], airtime_ms=1.0)
    sc.emit("b", 80010, "tx", kind="entry", length=120, pkt=p[5], airtime_ms=1.0)
    sc.emit("c", 80020, "rx", kind="entry", length=120, pkt=p[5], src="a")
    # p6: rx 14 s after tx, in the next time bucket of the join.
    sc.emit("a", 100000, "tx", kind="entry", length=120, pkt=p[6], airtime_ms=1.0)
    sc.emit("b", 114000, "rx", kind="entry", length=120, pkt=p[6])
    # d only listens and hears nothing that was logged as sent; a tx without pkt is ignored.
    sc.emit("d", 1000, "rx", kind="entry", length=120, pkt=p[7])
    sc.emit("a", 1000, "tx", kind="entry", length=120, airtime_ms=1.0)
    got = M.delivery(_ev(spark, sc))
    sig = {(r["sender"], r["receiver"]): (r["rssi_mean"], r["snr_mean"]) for r in got.collect()}
    assert sig[("a", "b")] == (-105.0, 0.5) and sig[("a", "d")] == (None, None)
    got = got.drop("rssi_mean", "snr_mean")
    exp = spark.createDataFrame([
        ("a", "b", 5, 3, 0.6), ("a", "c", 5, 2, 0.4), ("a", "d", 5, 0, 0.0),
        ("b", "a", 2, 1, 0.5), ("b", "c", 2, 0, 0.0), ("b", "d", 2, 0, 0.0),
        ("c", "a", 1, 1, 1.0), ("c", "b", 1, 0, 0.0), ("c", "d", 1, 0, 0.0),
    ], "sender string, receiver string, sent long, delivered long, ratio double")
    assertDataFrameEqual(got, exp)
    # A shorter window loses the 14 s delivery of p6.
    short = {(r["sender"], r["receiver"]): r["delivered"]
             for r in M.delivery(_ev(spark, sc), window_ms=10000).collect()}
    assert short[("a", "b")] == 2


def test_replication_latency_per_entry(spark):
    f1, f2, f3 = hexid("1"), hexid("2"), hexid("3")
    sc = Scenario()
    sc.emit("a", 1000, "append", feed=f1, seq=1, own=True, origin_ts=T0 + 1000)
    sc.emit("b", 6000, "append", feed=f1, seq=1, origin_ts=T0 + 1000)
    sc.emit("c", 10000, "append", feed=f1, seq=1)
    sc.emit("c", 13000, "append", feed=f1, seq=1)      # again after a restart: first counts
    sc.emit("b", 20000, "append", feed=f2, seq=1, own=True)
    sc.emit("a", 21000, "append", feed=f2, seq=1)
    sc.emit("c", 30000, "append", feed=f3, seq=1)      # authoring time unknown
    got = M.replication(_ev(spark, sc))
    exp = spark.createDataFrame([
        (f1, 1, "b", T0 + 1000, T0 + 6000, 5000),
        (f1, 1, "c", T0 + 1000, T0 + 10000, 9000),
        (f2, 1, "a", T0 + 20000, T0 + 21000, 1000),
        (f3, 1, "c", None, T0 + 30000, None),
    ], "feed string, seq long, node string, authored_ts long, stored_ts long, latency_ms long")
    assertDataFrameEqual(got, exp)


def test_goset_convergence(spark):
    s1, s2, s3, s4, s6 = (hexid(c) for c in "12346")
    sc = Scenario()
    for node, at, state, count in [
            ("a", 0, s1, 1), ("a", 10000, s2, 2), ("a", 30000, s3, 3), ("a", 55000, s6, 4),
            ("b", 3000, s1, 1), ("b", 4000, s1, 1), ("b", 12000, s2, 2), ("b", 50000, s3, 3),
            ("c", 5000, s1, 1), ("c", 11000, s2, 2), ("c", 31000, s4, 3), ("c", 60000, s3, 3)]:
        sc.emit(node, at, "goset", count=count, state=state)
    got = M.goset_convergence(_ev(spark, sc))
    exp = spark.createDataFrame([
        (s1, 1, T0, "a", 3, 3, T0 + 5000, 5000),
        (s2, 2, T0 + 10000, "a", 3, 3, T0 + 12000, 2000),
        # everyone reached s3, but a had moved on before c got there
        (s3, 3, T0 + 30000, "a", 3, 3, None, None),
        (s4, 3, T0 + 31000, "c", 1, 3, None, None),
        (s6, 4, T0 + 55000, "a", 1, 3, None, None),
    ], "state string, count int, first_seen_ts long, first_node string, nodes_reached long, "
       "nodes_total int, converged_ts long, convergence_ms long")
    assertDataFrameEqual(got, exp, ignoreNullable=True)


def test_session_stats(spark):
    peer = hexid("e")
    sc = Scenario()
    common = dict(proto="setu", peer=peer, mode="bft", msgs_sent=1, msgs_recv=1)
    sc.emit("h1", 0, "sync_start", proto="setu", peer=peer)
    sc.emit("h1", 100, "sync_done", ok=True, rounds=3, bytes_sent=1000, bytes_recv=2000,
            duration_ms=100.0, **common)
    sc.emit("h1", 200, "sync_done", ok=True, rounds=1, bytes_sent=500, bytes_recv=500,
            duration_ms=300.0, **common)
    sc.emit("h2", 300, "sync_done", ok=False, rounds=0, bytes_sent=10, bytes_recv=0,
            duration_ms=50.0, reason="timeout", **common)
    sc.emit("h2", 400, "sync_done", proto="trdag", peer=peer, ok=True, rounds=2,
            bytes_sent=400, bytes_recv=100, duration_ms=40.0)
    sess = M.sessions(_ev(spark, sc))
    assert [r["bytes_total"] for r in sess.collect()] == [3000, 1000, 10, 500]
    got = M.session_stats(sess)
    exp = spark.createDataFrame([
        ("setu", "bft", 3, 2, 1, 4010 / 3, 3000, 4 / 3, 3, 150.0, 100.0, 300.0),
        ("trdag", None, 1, 1, 0, 500.0, 500, 2.0, 2, 40.0, 40.0, 40.0),
    ], "proto string, mode string, sessions long, ok long, failed long, "
       "bytes_total_mean double, bytes_total_max long, rounds_mean double, rounds_max long, "
       "duration_ms_mean double, duration_ms_median double, duration_ms_max double")
    assertDataFrameEqual(got, exp)


def test_compute_writes_every_table(spark, tmp_path):
    sc = Scenario()
    sc.emit("a", 0, "tx", kind="entry", length=120, airtime_ms=10.0, pkt="ab" * 8)
    sc.emit("b", 50, "rx", kind="entry", length=120, pkt="ab" * 8)
    sc.emit("b", 60, "drop", reason="bad crc", length=33)
    sc.emit("b", 70, "drop", reason="bad crc")
    counts = M.compute(spark, _ev(spark, sc), str(tmp_path / "m"))
    assert set(counts) == set(M.TABLES)
    assert counts["airtime_hourly"] == 1 and counts["delivery"] == 1
    assert counts["replication"] == 0 and counts["sessions"] == 0
    assert [tuple(r) for r in M.read(spark, str(tmp_path / "m"), "drops").collect()] == \
        [("b", "bad crc", 2)]


def test_syncs_pair_the_two_ends_of_each_sync(spark):
    ka, kb, kc = "a" * 64, "b" * 64, "c" * 64
    A, B, C = "host-" + ka[:12], "host-" + kb[:12], "host-" + kc[:12]
    sc = Scenario()
    # sync 1: A and B both log it (A first); A sent 100 bytes / 3 elements, got 900 / 7
    sc.emit(A, 1000, "sync_done", proto="setu", peer=kb, ok=True, mode="full", rounds=2,
            bytes_sent=100, bytes_recv=900, elements_sent=3, elements_recv=7,
            duration_ms=80.0)
    sc.emit(B, 1050, "sync_done", proto="setu", peer=ka, ok=True, rounds=2, bytes_sent=900,
            bytes_recv=100, elements_sent=7, elements_recv=3, duration_ms=90.0)
    # sync 2 of the same pair, ten minutes later, logged by B only, and failed
    sc.emit(B, 600000, "sync_done", proto="setu", peer=ka, ok=False, bytes_sent=5,
            bytes_recv=9, reason="timeout")
    # the same hosts with another protocol at the same time: its own sync
    sc.emit(A, 1010, "sync_done", proto="trdag", peer=kb, ok=True, bytes_sent=1, bytes_recv=2)
    # A with C
    sc.emit(C, 2000, "sync_done", proto="setu", peer=ka, ok=True, bytes_sent=40, bytes_recv=60)
    rows = [r.asDict() for r in M.syncs(M.sessions(_ev(spark, sc))).collect()]
    key = [(r["proto"], r["a"], r["b"], r["ends"], r["ok"], r["bytes_ab"], r["bytes_ba"])
           for r in rows]
    assert key == [("setu", A, B, 2, True, 100, 900), ("trdag", A, B, 1, True, 1, 2),
                   ("setu", A, C, 1, True, 60, 40), ("setu", A, B, 1, False, 9, 5)]
    first = rows[0]
    assert (first["elements_ab"], first["elements_ba"], first["duration_ms"], first["mode"],
            first["ts"]) == (3, 7, 90.0, "full", T0 + 1000)
