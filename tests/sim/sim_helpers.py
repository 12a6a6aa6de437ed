"""Scenario builders for the simulator tests."""
from tssb.sim import Simulator, scenario


def quiet_sim(positions, region="US915.a", duration_s=0.45, **radio):
    """A simulator over fixed positions, no shadowing, no posts, with tracing on; it
    stops before the nodes' own first transmissions (500 ms)."""
    r = {"shadowing_sigma_db": 0.0}
    r.update(radio)
    sc = scenario.from_dict({
        "name": "t", "seed": 5, "region": region, "duration_s": duration_s,
        "stop_when_converged": False,
        "topology": {"kind": "positions", "positions": [list(p) for p in positions]},
        "radio": r, "authors": {"nodes": [0]}, "posts": {"per_author": 0}})
    return Simulator(sc, trace=True)
