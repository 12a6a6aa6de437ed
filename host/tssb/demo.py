"""The main job (`make demo`): the whole system end to end on one machine.

1. mesh:   a dozen simulated LoRa boards (tssb.sim: the firmware's scheduler and limiter
           around the core Node, Semtech airtime, collisions) replicate short and
           side-chained posts of a few authors until every feed is complete everywhere.
2. bridge: board 0 is then plugged into host A: its store and identity boot the
           firmware's own loop (tssb.sim.usb: NodeLink, Firmware, SerialBridge on the USB
           console; the console is a pseudo-terminal, the radio hears no one), and host A
           runs the `tssb bridge` host side (HostNode over its SQLite store, SerialLink,
           the tinyssb.link framing). Host A starts empty and without a feed of its own,
           learns board 0's feeds from its GOSET claims and fetches every entry and chunk
           with WANT/CHNK, then checks they are byte-identical to board 0's.
3. hosts:  host B, with half of those entries (copied in as its starting state) and posts
           of its own, reconciles with host A using SETU over a secret-handshake session
           on loopback.
4. spark:  every event log (boards, hosts) is ingested with Spark into Parquet and turned
           into the HTML report with plots.

One timeline: the boards log virtual time (VIRTUAL_EPOCH_MS + virtual ms); the hosts'
event logs, and board 0's lines over the bridge, continue it (`sim_clock`: the virtual
time the mesh run ended plus the wall time since), so the report has one time axis.

Each step prints what happened and the run ends with a short summary; OUT/summary.json
keeps the figures (sections mesh, bridge, hosts, spark).
"""
import asyncio
import json
import os
import shutil
import time

from tinyssb.eventlog import VIRTUAL_EPOCH_MS

BRIDGE_TIMEOUT_S = 120.0  # a healthy run takes well under a minute at real-time speed
BRIDGE_PROGRESS_S = 3.0
STATUS_TIMEOUT_S = 5.0
SERVER_DONE_TIMEOUT_S = 5.0


def mesh_step(out, seed=1, say=print):
    """Replicate short and side-chained posts of a few authors across a dozen simulated
    LoRa boards (tssb.sim, bundled scenario "demo") until every feed is complete at every
    board; event logs (tx/rx with airtime_ms, rssi, snr) go to OUT/logs."""
    from tssb import sim
    from tssb.cli.sim import summary_lines
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


def sim_clock(end_ms):
    """An event-log clock continuing the simulator's timeline.

    Returns: function() -> VIRTUAL_EPOCH_MS + end_ms + wall ms elapsed since this call.
    """
    base = VIRTUAL_EPOCH_MS + end_ms
    t0 = time.monotonic()
    return lambda: base + int((time.monotonic() - t0) * 1000)


class BridgeError(RuntimeError):
    """The bridge step did not complete; the message says how far it got."""


def _tally(store, fids):
    """(entries, chunks) a store holds of the feeds fids."""
    n = c = 0
    for fid in fids:
        if store.has_feed(fid):
            top = store.front(fid)[0]
            n += top
            c += sum(store.chunk_count(fid, s) for s in range(1, top + 1))
    return n, c


def _differences(src, dst, fids):
    """Entries and chunks of src that dst lacks or holds with other bytes."""
    bad = []
    for fid in fids:
        for seq in range(1, src.front(fid)[0] + 1):
            if not dst.has_feed(fid) or dst.entry(fid, seq) != src.entry(fid, seq):
                bad.append((fid.hex()[:8], seq))
                continue
            for k in range(src.chunk_count(fid, seq)):
                if dst.chunk(fid, seq, k) != src.chunk(fid, seq, k):
                    bad.append((fid.hex()[:8], seq, k))
    return bad


def bridge_step(ctx, board, timeout_s=BRIDGE_TIMEOUT_S, scale=1, say=print):
    """Bridge a board to a host over its (pseudo-terminal) USB port until the host holds
    every entry and chunk the board holds.

    The host side is `tssb bridge`'s: a HostNode over ctx's SQLite store with the board
    attached by tssb.bridge.runner.attach_board (SerialLink opening board.port_name,
    BoardPort, the board's event lines appended to ctx's event log). The host node has
    no feed of its own (it would join the GOSET and reach the board), so what it fetches
    are exactly the feeds the board's GOSET claims.

    Args:
        ctx: the host's Context.
        board: a tssb.sim.usb.UsbBoard (started and stopped here).
        timeout_s: wall-clock bound of the whole step.
        scale: speed of the host node's clock; pass the board's (UsbBoard scale).
    Returns:
        summary dict (ok: every entry and chunk arrived byte-identical).
    Raises:
        BridgeError: not complete within timeout_s (the message says what arrived).
    """
    from tinyssb import link
    from tssb.bridge.hostnode import HostNode
    from tssb.bridge.runner import EventSink, attach_board

    fids = list(board.store.feeds())
    want = _tally(board.store, fids)
    say("bridge: board 0 (%d feeds, %d entries, %d chunks) on pseudo-terminal %s, "
        "host A starts empty" % (len(fids), want[0], want[1], board.port_name))
    states = []

    def on_state(msg):
        if not states or states[-1] != msg:
            states.append(msg)
            say("bridge:   serial link: " + msg)

    async def go():
        h = HostNode(ctx.store, None, ctx.events,
                     clock=lambda: int(time.monotonic() * 1000 * scale))
        port, sl = attach_board(h, ctx, lambda: board.port_name, EventSink(ctx.events, ctx.events.clock),
                                on_state=on_state)
        task = asyncio.ensure_future(h.run())
        t0 = time.monotonic()
        next_say = t0 + BRIDGE_PROGRESS_S
        status = None
        try:
            while True:
                got = _tally(ctx.store, fids)
                now = time.monotonic()
                if got == want:
                    break
                if now - t0 > timeout_s:
                    why = ("board 0 never said HELLO (is its firmware running?)"
                           if port.device is None else "replication stalled")
                    raise BridgeError(
                        "bridge: FAILED after %.0f s: host A received %d of %d entries and "
                        "%d of %d chunks from board 0; %s; link %d bytes in, %d out"
                        % (now - t0, got[0], want[0], got[1], want[1], why, sl.bytes_in,
                           sl.bytes_out))
                if status is None and port.device is not None:
                    # the board's command path answers too (not only its radio mirror)
                    try:
                        status = await port.request(link.status_request, STATUS_TIMEOUT_S)
                    except (asyncio.TimeoutError, RuntimeError) as e:
                        raise BridgeError("bridge: FAILED: board 0 said HELLO but did not "
                                          "answer STATUS: %r" % e)
                    say("bridge:   board 0 answered: HELLO from %s, status: %d feeds, plan %s"
                        % (port.device.get("name"), status["feeds"], status["plan"]))
                if now >= next_say:
                    next_say = now + BRIDGE_PROGRESS_S
                    say("bridge:   %.0f s: host A has %d/%d entries, %d/%d chunks"
                        % (now - t0, got[0], want[0], got[1], want[1]))
                await asyncio.sleep(0.1)
            wall = time.monotonic() - t0
        finally:
            task.cancel()
            sl.stop()
        return wall, port, sl, h

    board.start()
    try:
        wall, port, sl, h = asyncio.run(go())
    finally:
        board.stop()
    bad = _differences(board.store, ctx.store, fids)
    up = port.counts["rx"] + port.counts["tx_mirror"] + port.counts["events"]
    down = h.stats["tx"]
    say("bridge: host A received %d entries and %d chunks from board 0 over a pty in %.1f s "
        "(%d frames, %d bytes)" % (want[0], want[1], wall, up + down, sl.bytes_in + sl.bytes_out))
    say("bridge: host A's copy is byte-identical to board 0's: %s"
        % ("yes" if not bad else "NO (%d differ: %s)" % (len(bad), bad[:5])))
    return {"ok": not bad, "feeds": len(fids), "entries": want[0], "chunks": want[1],
            "seconds": round(wall, 2), "scale": scale, "frames_up": up, "frames_down": down,
            "bytes_up": sl.bytes_in, "bytes_down": sl.bytes_out,
            "board_events": port.counts["events"], "identical": not bad}


def hosts_step(a, b, board_store, say=print):
    """Host B reconciles with host A over SETU in a secure session (loopback).

    Args:
        a: host A's Context (holding board 0's feeds, from the bridge step).
        b: host B's Context (empty); it gets half of board 0's entries (set-up) and
            two posts of its own.
    """
    from tinyssb import entry
    from tssb.session import connect, start_server
    from tssb.setu.driver import reconcile
    from tssb.setu.machine import Config
    from tssb.setu.service import summary_fields
    from tssb.setu.tinyssb_elements import StoreSource

    b.set_network_key(a.network_key)
    a.store.add_peer(b.identity.public, name="hostB")
    with b.store.transaction():
        nb = _copy_store(board_store, b.store, upto=lambda fid: board_store.front(fid)[0] // 2)
    seq = 0
    au = entry.Author(b.identity.public, b.identity.sign)
    b.store.add_feed(au.fid)
    for text in (b"host B: hello from the wired side",
                 b"host B: a longer note that needs a side chain. " * 8):
        seq, pkt, mid, chunks = au.next(text)
        b.store.append(au.fid, seq, pkt, mid)
        for k, c in enumerate(chunks):
            b.store.put_chunk(au.fid, seq, k, c)
    say("hosts: host A holds board 0's feeds (%d entries); host B holds %d of them plus %d "
        "of its own" % (_tally(a.store, a.store.feeds())[0], nb, seq))

    async def go():
        server = await start_server(a, "127.0.0.1", 0)
        try:
            src = StoreSource(b.store)
            src.refresh()
            sess = await connect("127.0.0.1", server.port, b, peer=a.identity.public)
            try:
                ch = await sess.open_stream("setu")
                b.events.emit("sync_start", proto="setu", peer=a.identity.public.hex())
                res = await reconcile(ch, src.eset, True, Config())
                # let host A's side finish (and log its sync_done) before the teardown
                # cancels it, else the report shows a failed session
                tasks = [t for s in server.sessions for t in s.service_tasks]
                if tasks:
                    await asyncio.wait(tasks, timeout=SERVER_DONE_TIMEOUT_S)
                return res
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


def summary_lines(summary, out):
    """The closing summary a person can read (figures from summary.json's sections)."""
    m = summary["mesh"]
    lines = ["demo: summary"]
    lines.append("  mesh      %s after %.1f s virtual; delivery ratio %.1f %% of %d receptions"
                 % ("converged" if m["ok"] else "NOT converged", (m["converge_ms"] or 0) / 1000,
                    100 * m["delivery_ratio"], m["delivery"]["attempts"]))
    share = sorted(m["airtime_share"].items(), key=lambda kv: -kv[1])
    lines.append("  airtime   " + ", ".join("%s %.1f %%" % (k, 100 * v) for k, v in share))
    br = summary.get("bridge")
    if br is None or not br["ok"]:
        lines.append("  bridge    FAILED" + (": " + br["error"] if br and "error" in br else ""))
    else:
        lines.append("  bridge    %d entries + %d chunks board 0 -> host A over a pty in %.1f s "
                     "(%d frames, %d bytes), byte-identical"
                     % (br["entries"], br["chunks"], br["seconds"],
                        br["frames_up"] + br["frames_down"], br["bytes_up"] + br["bytes_down"]))
    h = summary.get("hosts")
    if h is not None:
        how = ("%d IBF round(s)" % h["rounds"]) if h["rounds"] else \
            "no IBF round: the cost model picks a whole-set transfer"
        lines.append("  SETU      %s mode (%s), %d bytes B->A, %d bytes A->B; stores "
                     "equal: %s" % (h["mode"], how, h["bytes_b_to_a"], h["bytes_a_to_b"],
                                    "yes" if h["ok"] else "NO"))
    sp = summary.get("spark")
    lines.append("  report    " + (sp["report"] if sp else "not built (Spark step skipped)"))
    lines.append("  figures   " + os.path.join(out, "summary.json"))
    return lines


def run(out="out/demo", seed=1, say=print, spark=True, bridge_scale=1,
        bridge_timeout_s=BRIDGE_TIMEOUT_S):
    """Run the steps; returns True when every step succeeded.

    Args:
        bridge_scale: speed of board 0's and host A's clocks in the bridge step (1: real
            time, as a board runs; tests use more).
    """
    from tssb.context import Context
    from tssb.sim.usb import UsbBoard

    os.makedirs(out, exist_ok=True)
    summary = {}
    sim, summary["mesh"] = mesh_step(out, seed, say)
    clock = sim_clock(sim.now)
    homes = os.path.join(out, "hosts")
    shutil.rmtree(homes, ignore_errors=True)
    a = Context.open(os.path.join(homes, "hostA"), clock=clock)
    b = Context.open(os.path.join(homes, "hostB"), clock=clock)
    b0 = sim.boards[0]
    try:
        dev = UsbBoard(b0.store, b0.identity, sim.plan, b0.name, scale=bridge_scale,
                       epoch_ms=clock())
        try:
            summary["bridge"] = bridge_step(a, dev, bridge_timeout_s, bridge_scale, say)
        except BridgeError as e:
            say(str(e))
            summary["bridge"] = {"ok": False, "error": str(e)}
        if summary["bridge"]["ok"]:
            summary["hosts"] = hosts_step(a, b, b0.store, say)
    finally:
        logs = os.path.join(out, "logs")
        for name, ctx in (("hostA", a), ("hostB", b)):
            with open(os.path.join(logs, name + ".jsonl"), "wb") as out_f:
                for path in ctx.events.files():   # closed files, then the live one
                    with open(path, "rb") as in_f:
                        shutil.copyfileobj(in_f, out_f)
            ctx.close()
    ok = all(v.get("ok", True) for v in summary.values())
    if spark and ok:
        summary["spark"] = spark_step(out, say)
    elif spark:
        say("spark: skipped (an earlier step failed)")
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    for line in summary_lines(summary, out):
        say(line)
    return ok
