"""The pipeline on logs the real producers wrote: a simulated mesh (firmware radio adapter,
core node) and host event logs."""
import json
import os

import pytest

from tssb_spark import ingest, metrics, report


@pytest.fixture(scope="module")
def mesh_logs(tmp_path_factory):
    from tssb import sim
    from tssb.context import EventLog
    logdir = str(tmp_path_factory.mktemp("mesh") / "logs")
    sc = sim.scenario.load(sim.scenario_path("small"))
    s = sim.Simulator(sc, logdir=logdir).run()
    assert s["converged"]
    # Two hosts log the two ends of one sync, as tssb sync and tssb serve do.
    ka, kb = "a1" * 32, "b2" * 32
    t = s["end_ms"] + eventlog_epoch()
    for me, peer, sent, recv in (("host-" + ka[:12], kb, 1200, 300),
                                 ("host-" + kb[:12], ka, 300, 1200)):
        log = EventLog(os.path.join(logdir, me, "events.jsonl.live"), me, clock=lambda: t)
        log.emit("sync_done", proto="setu", peer=peer, ok=True, mode="differential",
                 rounds=2, bytes_sent=sent, bytes_recv=recv, elements_sent=sent // 100,
                 elements_recv=recv // 100, duration_ms=40.0)
    return logdir


def eventlog_epoch():
    from tinyssb.eventlog import VIRTUAL_EPOCH_MS
    return VIRTUAL_EPOCH_MS


def _direct_delivery(logdir, window_ms=metrics.DEFAULT_MATCH_WINDOW_MS):
    """Delivery per link computed straight from the JSONL, by the definition in
    docs/spark.md: an rx counts for the latest tx of its packet by its src within the
    window before it."""
    tx, rx = {}, []
    for base, _, files in os.walk(logdir):
        for n in files:
            if not n.endswith(".jsonl"):
                continue
            for line in open(os.path.join(base, n)):
                r = json.loads(line)
                if r["event"] == "tx" and "pkt" in r:
                    tx.setdefault((r["node"], r["pkt"]), []).append((r["ts"], r["id"]))
                elif r["event"] == "rx" and "pkt" in r:
                    rx.append(r)
    sent = {}
    for (node, _), lst in tx.items():
        sent[node] = sent.get(node, 0) + len(lst)
    hit = {}
    for r in rx:
        assert r.get("src"), r        # the simulator names the sender of every frame
        cands = [c for c in tx.get((r["src"], r["pkt"]), ())
                 if c[0] <= r["ts"] <= c[0] + window_ms]
        if cands:
            hit.setdefault((r["src"], r["node"]), set()).add(max(cands)[1])
    return sent, {k: len(v) for k, v in hit.items()}


def test_delivery_per_link_matches_the_jsonl(spark, mesh_logs, tmp_path):
    lake = str(tmp_path / "lake")
    st = ingest.ingest(spark, mesh_logs, lake, mode="batch")
    assert st["quarantined"] == 0 and st["accepted"] == st["lines"]
    got = metrics.delivery(ingest.read_events(spark, lake)).collect()
    sent, delivered = _direct_delivery(mesh_logs)
    assert delivered and sum(delivered.values()) > 0
    for r in got:
        assert r["sent"] == sent[r["sender"]]
        assert r["delivered"] == delivered.get((r["sender"], r["receiver"]), 0), r
    assert {(r["sender"], r["receiver"]) for r in got if r["delivered"]} == set(delivered)


def test_every_report_section_holds_data(spark, mesh_logs, tmp_path):
    path = report.build(mesh_logs, str(tmp_path / "r"), spark=spark, mode="batch")
    page = open(path, encoding="utf-8").read()
    assert "No data" not in page and "No GOSET" not in page and "No host-to-host" not in page
    for png in ("agreement.png", "replication.png", "delivery.png", "airtime.png"):
        assert 'src="%s"' % png in page
    assert "Yes: all 3 nodes that logged a GOSET held the same one (1 feed)" in page
    assert "US915/AU915" in page           # the region read from the tx frequency
    assert "<td>setu</td><td>differential</td>" in page and "<td>2</td></tr>" in page
