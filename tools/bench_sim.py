"""Simulator figures (`make bench`): one JSON object per line.

  throughput  simulated node-seconds per wall-second for 10, 50 and 200 boards on a random
              geometric topology of constant density; ratio against the 10-board case;
              then the 50 boards again, all moving (random waypoint, 1-2 m/s), ratio
              against the static 50
  latency     time for a new entry (short) or a side-chained post (long) of a feed the
              mesh replicates (its author posted once before, at 5 s) to reach a board h
              hops away on a line, next to the lower bound h x airtime of the frames one
              hop needs (WANT + entry, plus CHNK + chunks for a long post); ratio =
              measured / bound, mean over seeds. latency_first_*: the same for the first
              entry of a new feed, which a hop passes on only once it verified it (its key
              is provisional before: issue 15), so it also pays the feed's discovery
  airtime     share of airtime spent on entries and chunks versus GOSET/WANT/CHNK in the
              bundled demo and random50 scenarios
All of the above run our boards; the same cases with deployed-behaviour boards (the
ESP32 GOSET algorithm and timers, `[deployed]` in a scenario) follow as *_deployed, and
  mixed       the demo with every other board deployed: convergence and airtime
  duty        the demo on EU868.a (1 % duty cycle) for an hour: each board's airtime
              against the budget the firmware limiter enforces (never above it)
"""
import json
import math
import time

from tinyssb import vectors
from tinyssb.frames import add_crc
from tssb.sim import Simulator, scenario, scenario_path
from tssbfw import regions
from tssbfw.airtime import plan_airtime_ms

THROUGHPUT = ((10, 600), (50, 240), (200, 60))   # (boards, virtual seconds)
DENSITY_M2 = 150.0 * 150.0                       # area per board
MOBILE_NODES = 50                                # the throughput case rerun with mobility
LINE_NODES = 6
SEEDS = tuple(range(1, 11))   # latency runs (a run is ~50 ms: ten seeds steady the means)
ENTRY_FRAME = 124   # 120-byte entry or chunk + CRC32 on air


def emit(**rec):
    print(json.dumps(rec), flush=True)


def throughput():
    base = None
    rates = {}
    for n, secs in THROUGHPUT:
        rates[n] = _throughput_case("throughput_%d" % n, n, secs, None, base)
        base = base or rates[n]
    mob = {"model": "random_waypoint", "speed_min_mps": 1.0, "speed_max_mps": 2.0}
    _throughput_case("throughput_%d_moving" % MOBILE_NODES, MOBILE_NODES,
                     dict(THROUGHPUT)[MOBILE_NODES], mob, rates[MOBILE_NODES])


def _throughput_case(label, n, secs, mobility, base):
    d = {"name": label, "seed": 1, "region": "US915.a", "duration_s": secs,
         "stop_when_converged": False,
         "topology": {"kind": "random", "nodes": n, "side_m": math.sqrt(n * DENSITY_M2)},
         "authors": {"nodes": list(range(0, n, max(1, n // 5)))},
         "posts": {"per_author": 2, "start_s": 10, "interval_s": 20, "sizes": [30, 300]}}
    if mobility:
        d["mobility"] = mobility
    sim = Simulator(scenario.from_dict(d))
    w0, c0 = time.perf_counter(), time.process_time()
    s = sim.run()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    rate = n * secs / wall
    emit(bench="sim", case=label, nodes=n, virtual_s=secs, moving=s["moving"],
         wall_s=round(wall, 3), cpu_s=round(cpu, 3), frames=s["frames"],
         node_s_per_wall_s=round(rate, 1), node_s_per_cpu_s=round(n * secs / cpu, 1),
         ratio=round(rate / (base or rate), 3))
    return rate


def latency(size, label, deployed=False, first=False):
    by_hop = {}
    bound_hop = None
    for seed in SEEDS:
        posts = ({"per_author": 1, "start_s": 60, "sizes": [size]} if first else
                 {"per_author": 2, "start_s": 5, "interval_s": 55, "sizes": [20, size]})
        d = {"name": "lat", "seed": seed, "region": "US915.a", "duration_s": 1800,
             "topology": {"kind": "line", "nodes": LINE_NODES, "spacing_m": 200},
             "radio": {"shadowing_sigma_db": 0.0},
             "authors": {"nodes": [0]}, "posts": posts}
        if deployed:
            d["deployed"] = {"nodes": list(range(LINE_NODES))}
            label_ = label + "_deployed"
        else:
            label_ = label
        sc = scenario.from_dict(d)
        sim = Simulator(sc)
        s = sim.run()
        if not s["converged"]:
            emit(bench="sim", case="latency_%s" % label_, seed=seed, converged=False)
            continue
        post = sim.posts[-1]
        hops = sim.hops(0)
        for i, t in post["done"].items():
            if hops[i] > 0:
                by_hop.setdefault(hops[i], []).append(t - post["t"])
        if bound_hop is None:
            bound_hop = _hop_bound(sim, post)
    label = ("first_" if first else "") + label + ("_deployed" if deployed else "")
    for h in sorted(by_hop):
        v = by_hop[h]
        mean = sum(v) / len(v)
        emit(bench="sim", case="latency_%s_hop%d" % (label, h), hops=h, size=size,
             runs=len(v), mean_ms=round(mean), min_ms=min(v), max_ms=max(v),
             bound_ms=h * bound_hop, ratio=round(mean / (h * bound_hop), 2))


def _hop_bound(sim, post):
    """Airtime of the frames one hop needs at least, measured on the run's own packets:
    a WANT and the 124-byte entry frame; for a side chain also one CHNK naming the chain
    and every chunk frame."""
    plan = sim.plan
    node = sim.boards[1].node
    air = (plan_airtime_ms(plan, len(add_crc(node.want_vector())))
           + plan_airtime_ms(plan, ENTRY_FRAME))
    if post["chunks"]:
        chnk = vectors.encode_chnk(node.chnk_dmx, [(0, post["seq"], 0)])
        air += plan_airtime_ms(plan, len(add_crc(chnk)))
        air += post["chunks"] * plan_airtime_ms(plan, ENTRY_FRAME)
    return air


def airtime(deployed=None, label=""):
    for name in ("demo", "random50"):
        sc = scenario.load(scenario_path(name))
        if deployed == "all":
            sc["deployed"] = list(range(sc["topology"]["nodes"]))
        elif deployed == "alternate":
            if name != "demo":
                continue
            sc["deployed"] = list(range(0, sc["topology"]["nodes"], 2))
        s = Simulator(sc).run()
        sh = s["airtime_share"]
        emit(bench="sim", case=("airtime_%s%s" % (name, label)) if deployed != "alternate"
             else "mixed_demo", nodes=s["nodes"], plan=s["plan"],
             deployed=len(sc.get("deployed", ())),
             converged=s["converged"], converge_s=(s["converge_ms"] or 0) / 1000,
             payload_share=round(s["payload_share"], 3),
             overhead_share=round(1 - s["payload_share"], 3),
             shares={k: round(v, 3) for k, v in sorted(sh.items())},
             delivery_ratio=round(s["delivery"]["ratio"], 3))


def duty():
    """The firmware limiter is the only way to the radio: no board exceeds its budget."""
    sc = scenario.load(scenario_path("demo"))
    sc["plan"] = regions.plan("EU868.a")
    sc["duration_ms"] = 3600 * 1000
    sc["stop_when_converged"] = False
    sim = Simulator(sc)
    s = sim.run()
    budget = sc["plan"]["limits"]["duty_permille"] * 3600 * 1000 // 1000
    most = max(b.tx_airtime_ms for b in sim.boards)
    emit(bench="sim", case="duty_eu868_demo_1h", plan="EU868.a", budget_ms=budget,
         max_board_airtime_ms=most, within=most <= budget,
         limited=s["sched"].get("limited", 0), refused=s["sched"].get("refused", 0),
         converged=s["converged"])


def main():
    throughput()
    latency(20, "short")
    latency(300, "long")
    latency(20, "short", first=True)
    airtime()
    latency(20, "short", deployed=True)
    latency(300, "long", deployed=True)
    latency(20, "short", deployed=True, first=True)
    airtime("all", "_deployed")
    airtime("alternate")
    duty()


if __name__ == "__main__":
    main()
