"""The main job (`make demo`): the whole system end to end on one machine.

Step 1 replicates feeds among a dozen tinySSB nodes on an in-memory broadcast medium
with a multi-hop topology, using the real protocol core with the deployed timers. Every
node writes its event log (JSONL, the shared schema) under OUT/logs. Later steps (LoRa
simulator, USB bridge, SETU between hosts, Spark report) join as they land.
"""
import json
import os
import random
import time

from tinyssb import crypto
from tinyssb.bus import Bus, same_stores
from tinyssb.eventlog import VIRTUAL_EPOCH_MS, EventLog, line_writer
from tinyssb.node import Node
from tinyssb.store import MemStore

N_NODES = 12
AUTHORS = 3


def _grid_links(n, width):
    links = set()
    for i in range(n):
        r, c = divmod(i, width)
        if c + 1 < width and i + 1 < n:
            links.add((i, i + 1))
        if i + width < n:
            links.add((i, i + width))
    return links


class _Clock:
    def __init__(self):
        self.now = 0

    def __call__(self):
        return VIRTUAL_EPOCH_MS + self.now


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
    return {"ok": ok, "converge_ms": s["converge_ms"], "goset_ms": s["goset_ms"],
            "packets": s["frames"], "bytes": s["bytes"],
            "by_kind": {k: v["frames"] for k, v in s["by_kind"].items()},
            "airtime_ms": s["airtime_ms"], "airtime_share": s["airtime_share"],
            "delivery_ratio": s["delivery"]["ratio"], "delivery": s["delivery"]}


def run(out="out/demo", seed=1, say=print):
    os.makedirs(out, exist_ok=True)
    summary = {"mesh": mesh_step(out, seed, say)}
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    say("demo: logs in %s, summary in %s" % (os.path.join(out, "logs"), os.path.join(out, "summary.json")))
    return all(v.get("ok", True) for v in summary.values())
