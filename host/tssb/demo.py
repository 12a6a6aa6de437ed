"""The main job (`make demo`): the whole system end to end on one machine.

1. mesh:  a dozen simulated LoRa boards (tssb.sim: the firmware's scheduler and limiter
          around the core Node, Semtech airtime, collisions) replicate short and
          side-chained posts of a few authors until every feed is complete everywhere.
2. hosts: host A holds what board 0 holds (its feeds mirrored into A's SQLite store);
          host B, with only part of those feeds and posts of its own, reconciles with A
          using SETU over a secret-handshake session on loopback.
3. spark: every event log (boards, hosts) is ingested with Spark into Parquet and turned
          into the HTML report with plots.

Each step prints what happened; OUT/summary.json keeps the figures.
"""
import asyncio
import json
import os
import shutil
import time


def mesh_step(out, seed=1, say=print):
    """Replicate short and side-chained posts of a few authors across a dozen simulated
    LoRa boards (tssb.sim, bundled scenario "demo") until every feed is complete at every
    board; event logs (tx/rx with airtime_ms, rssi, snr) go to OUT/logs."""
    from tssb import sim
    from tssb.cmd_sim import summary_lines
    sc = sim.scenario.load(sim.scenario_path("demo"))
    sc["seed"] = seed
    logdir = os.path.join(out, "logs")
    t0 = time.process_time()
    runner = sim.Simulator(sc, logdir=logdir)
    say("mesh: %d simulated LoRa boards (%s, %.0f m apart, plan %s), %d authors"
        % (runner.n, sc["topology"]["kind"], sc["topology"]["spacing_m"], sc["plan"]["name"],
           len(sc["authors"])))
    s = runner.run(progress=lambda now, until: say("mesh:   %.0f s virtual" % (now / 1000)),
                   progress_every_ms=60000)
    ok = s["converged"] and runner.converged()
    for line in summary_lines(s)[1:]:
        say("mesh:" + line)
    say("mesh: %.1f s of CPU" % (time.process_time() - t0))
    return runner, {"ok": ok, "converge_ms": s["converge_ms"], "goset_ms": s["goset_ms"],
            "packets": s["frames"], "bytes": s["bytes"],
            "by_kind": {k: v["frames"] for k, v in s["by_kind"].items()},
            "airtime_ms": s["airtime_ms"], "airtime_share": s["airtime_share"],
            "delivery_ratio": s["delivery"]["ratio"], "delivery": s["delivery"]}


def _copy_store(src, dst, upto=None):
    """Copy feeds (entries and chunks) from one feed store to another; `upto(fid)` caps
    how many entries of each feed are copied."""
    from tinyssb import entry
    n = 0
    for fid in src.feeds():
        dst.add_feed(fid)
        top = src.front(fid)[0] if upto is None else min(src.front(fid)[0], upto(fid))
        have = dst.front(fid)[0]
        prev = dst.front(fid)[1]
        for seq in range(have + 1, top + 1):
            pkt = src.entry(fid, seq)
            mid = entry.mid_of(entry.nam(fid, seq, prev), pkt)
            dst.append(fid, seq, pkt, mid)
            for k in range(src.chunk_count(fid, seq)):
                dst.put_chunk(fid, seq, k, src.chunk(fid, seq, k))
            prev = mid
            n += 1
    return n


def hosts_step(out, board_store, say=print):
    """Host B reconciles with host A over SETU in a secure session (loopback)."""
    from tssb.context import Context
    from tssb.session import connect, start_server
    from tssb.setu.driver import reconcile
    from tssb.setu.machine import Config
    from tssb.setu.service import summary_fields
    from tssb.setu.tinyssb_elements import StoreSource

    homes = os.path.join(out, "hosts")
    shutil.rmtree(homes, ignore_errors=True)
    a = Context.open(os.path.join(homes, "hostA"))
    b = Context.open(os.path.join(homes, "hostB"))
    b.set_network_key(a.network_key)
    a.store.add_peer(b.identity.public, name="hostB")
    with a.store.transaction():
        na = _copy_store(board_store, a.store)
    with b.store.transaction():
        nb = _copy_store(board_store, b.store, upto=lambda fid: board_store.front(fid)[0] // 2)
    from tinyssb import entry
    seq = 0
    au = entry.Author(b.identity.public, b.identity.sign)
    b.store.add_feed(au.fid)
    for text in (b"host B: hello from the wired side",
                 b"host B: a longer note that needs a side chain. " * 8):
        seq, pkt, mid, chunks = au.next(text)
        b.store.append(au.fid, seq, pkt, mid)
        for k, c in enumerate(chunks):
            b.store.put_chunk(au.fid, seq, k, c)
    say("hosts: host A mirrors board 0 (%d entries); host B holds %d of them plus %d of its own"
        % (na, nb, seq))

    async def go():
        server = await start_server(a, "127.0.0.1", 0)
        try:
            src = StoreSource(b.store)
            src.refresh()
            sess = await connect("127.0.0.1", server.port, b, peer=a.identity.public)
            try:
                ch = await sess.open_stream("setu")
                b.events.emit("sync_start", proto="setu", peer=a.identity.public.hex())
                return await reconcile(ch, src.eset, True, Config())
            finally:
                await sess.close()
        finally:
            await server.close()

    t0 = time.perf_counter()
    res = asyncio.run(go())
    wall = time.perf_counter() - t0
    b.events.emit("sync_done", **summary_fields(a.identity.public.hex(), res))
    same = sorted((f, a.store.front(f)) for f in a.store.feeds()) == \
        sorted((f, b.store.front(f)) for f in b.store.feeds())
    say("hosts: SETU %s mode (profile %s), %d IBF round(s): %d bytes B->A, %d bytes A->B, "
        "%d elements moved (%d B->A, %d A->B), %.2f s"
        % (res["mode"], res["profile"], res["rounds"], res["bytes_sent"], res["bytes_recv"],
           res["elements_sent"] + res["elements_recv"], res["elements_sent"], res["elements_recv"], wall))
    say("hosts: both stores hold the same feeds: %s" % ("yes" if same else "NO"))
    logs = os.path.join(out, "logs")
    for name, ctx in (("hostA", a), ("hostB", b)):
        if os.path.exists(ctx.events.path):
            shutil.copy(ctx.events.path, os.path.join(logs, name + ".jsonl"))
        ctx.close()
    return {"ok": same, "mode": res["mode"], "profile": res["profile"], "rounds": res["rounds"],
            "bytes_b_to_a": res["bytes_sent"], "bytes_a_to_b": res["bytes_recv"],
            "elements_sent": res["elements_sent"], "elements_recv": res["elements_recv"]}


def spark_step(out, say=print):
    """Ingest every event log of the run with Spark and write the HTML report."""
    from tssb_spark import report
    from tssb_spark.session import get_spark
    t0 = time.perf_counter()
    say("spark: starting a local Spark session (local[2])")
    spark = get_spark("local[2]", {"spark.ui.showConsoleProgress": "false",
                                   "spark.ui.enabled": "false",
                                   "spark.sql.shuffle.partitions": "4"})
    spark.sparkContext.setLogLevel("ERROR")
    path = report.build(os.path.join(out, "logs"), os.path.join(out, "report"), spark=spark,
                        progress=lambda s: say("spark: " + s))
    say("spark: report written in %.0f s: %s" % (time.perf_counter() - t0, path))
    return {"ok": True, "report": path}


def run(out="out/demo", seed=1, say=print, spark=True):
    os.makedirs(out, exist_ok=True)
    summary = {}
    sim, summary["mesh"] = mesh_step(out, seed, say)
    summary["hosts"] = hosts_step(out, sim.boards[0].store, say)
    if spark:
        summary["spark"] = spark_step(out, say)
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    say("demo: logs in %s, summary in %s" % (os.path.join(out, "logs"), os.path.join(out, "summary.json")))
    return all(v.get("ok", True) for v in summary.values())
