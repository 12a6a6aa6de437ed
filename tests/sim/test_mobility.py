"""Node mobility: off by default, random waypoint positions, links that follow them."""
import math
import os

import pytest

from tinyssb.frames import add_crc
from tssb.cli.sim import summary_lines
from tssb.sim import ScenarioError, Simulator, mobility, scenario, scenario_path
from tssbfw.airtime import plan_airtime_ms

FRAME = add_crc(b"M" * 7 + b"mobile")
AREA = (-50.0, -20.0, 950.0, 480.0)


def walk(seed=3, pause_s=5.0, vmin=2.0, vmax=6.0, moving=(0, 1)):
    return mobility.RandomWaypoint(seed, [(0.0, 0.0), (900.0, 400.0), (10.0, 10.0)], moving,
                                   AREA, vmin, vmax, pause_s)


def mule(**mob):
    sc = scenario.load(scenario_path("mule"))
    sc["mobility"].update(mob)
    return sc


def read_logs(d):
    return {n: open(os.path.join(d, n)).read() for n in sorted(os.listdir(d))}


def test_mobility_is_off_by_default():
    sc = scenario.from_dict({})
    assert sc["mobility"]["model"] == "none"
    sim = Simulator(sc)
    assert sim.mobility is None
    assert sim.position(3, 10 ** 9) == sim.positions[3]
    s = sim.summary()
    assert s["mobility"] == "none" and s["moving"] == 0


def test_model_none_with_other_keys_gives_the_static_run(tmp_path):
    d = {"seed": 7, "region": "US915.a", "duration_s": 120,
         "topology": {"kind": "line", "nodes": 4, "spacing_m": 120},
         "authors": {"nodes": [0]}, "posts": {"per_author": 1, "start_s": 10}}
    Simulator(scenario.from_dict(d), logdir=str(tmp_path / "a")).run()
    d["mobility"] = {"model": "none", "speed_min_mps": 30, "speed_max_mps": 40}
    Simulator(scenario.from_dict(d), logdir=str(tmp_path / "b")).run()
    assert read_logs(tmp_path / "a") == read_logs(tmp_path / "b")


def test_positions_are_a_function_of_seed_node_and_time():
    times = [0, 999, 60000, 3600000, 120000, 5]   # out of order: replays from the start
    a = walk()
    pa = {t: a.position(1, t) for t in times}
    b = walk()
    assert pa == {t: b.position(1, t) for t in sorted(times)}
    assert pa != {t: walk(seed=4).position(1, t) for t in times}
    assert a.position(0, 60000) != a.position(1, 60000)   # each node its own walk
    assert a.position(0, 0) == (0.0, 0.0)                 # starts at its placement


def test_positions_stay_in_the_area_and_speeds_stay_below_the_maximum():
    w = walk()
    x0, y0, x1, y1 = AREA
    step = 250
    prev = w.position(1, 0)
    fastest, paused = 0.0, 0
    for t in range(step, 4 * 3600 * 1000, step):
        p = w.position(1, t)
        assert x0 - 1e-9 <= p[0] <= x1 + 1e-9 and y0 - 1e-9 <= p[1] <= y1 + 1e-9
        v = math.hypot(p[0] - prev[0], p[1] - prev[1]) / (step / 1000)
        assert v <= 6.0 + 1e-9
        fastest = max(fastest, v)
        paused += v == 0
        prev = p
    assert fastest > 2.0     # it does move, within [vmin, vmax] on straight stretches
    assert paused > 0        # and stops at waypoints
    assert w.position(2, 10 ** 7) == (10.0, 10.0)   # not in `moving`: stays


def test_a_receiver_moving_out_of_range_stops_receiving():
    sc = scenario.from_dict({
        "seed": 2, "region": "US915.a", "duration_s": 400, "stop_when_converged": False,
        "topology": {"kind": "positions", "positions": [[0, 0], [100, 0]]},
        "radio": {"shadowing_sigma_db": 0}, "authors": {"nodes": [0]},
        "posts": {"per_author": 0},
        "mobility": {"model": "random_waypoint", "nodes": [1], "speed_min_mps": 20,
                     "speed_max_mps": 30, "area": [0, -10, 1500, 10]}})
    sim = Simulator(sc, trace=True)
    air = plan_airtime_ms(sim.plan, len(FRAME))
    starts = list(range(1000, 390000, 3000))
    for t in starts:
        sim.transmit(0, FRAME, t)
    sim.run()
    heard = {(end, src) for end, src, dst, _ in sim.trace if dst == 1}
    expect = []
    for t in starts:
        x, y = sim.position(1, t)
        rssi = sim.model.mean_rssi(math.hypot(x, y))
        expect.append(sim.model.decodable(rssi))
        assert ((t + air, 0) in heard) == expect[-1], t
    assert True in expect and False in expect   # the link came and went


def test_data_mule_carries_posts_between_clusters_only_when_moving():
    sim = Simulator(mule())
    assert sim.hops(0)[3:6] == [-1, -1, -1]   # clusters apart at the start
    s = sim.run()
    assert s["converged"] and sim.converged()
    assert s["mobility"] == "random_waypoint" and s["moving"] == 1
    assert "  mobility: random waypoint, 1 of 7 boards moving" in summary_lines(s)
    still = mule(model="none")
    still["duration_ms"] = 2 * s["converge_ms"]
    s2 = Simulator(still).run()
    assert not s2["converged"] and s2["posts"] == s["posts"]


def test_mule_run_is_deterministic(tmp_path):
    sc = mule()
    sc["duration_ms"] = 120000
    Simulator(sc, logdir=str(tmp_path / "a")).run()
    Simulator(sc, logdir=str(tmp_path / "b")).run()
    a = read_logs(tmp_path / "a")
    assert a == read_logs(tmp_path / "b")
    sc["seed"] = 5
    Simulator(sc, logdir=str(tmp_path / "c")).run()
    assert a != read_logs(tmp_path / "c")


@pytest.mark.parametrize("bad,where", [
    ({"colour": 1}, "mobility.colour"),
    ({"model": "brownian"}, "mobility.model"),
    ({"model": 1}, "mobility.model"),
    ({"nodes": [12]}, "mobility.nodes"),
    ({"nodes": []}, "mobility.nodes"),
    ({"nodes": [1, 1]}, "mobility.nodes"),
    ({"speed_min_mps": 0}, "mobility.speed_min_mps"),
    ({"speed_min_mps": 5, "speed_max_mps": 2}, "mobility.speed_max_mps"),
    ({"speed_max_mps": 1000}, "mobility.speed_max_mps"),
    ({"pause_s": -1}, "mobility.pause_s"),
    ({"area": [0, 0, 10]}, "mobility.area"),
    ({"area": [10, 0, 0, 10]}, "mobility.area"),
    ({"area": [0, 0, 100, 100], "margin_m": 5}, "mobility.margin_m"),
])
def test_bad_mobility_tables_are_refused_with_the_key(bad, where):
    with pytest.raises(ScenarioError) as e:
        scenario.from_dict({"mobility": dict({"model": "random_waypoint"}, **bad)})
    assert e.value.where == where


@pytest.mark.parametrize("mob,where", [
    ({"area": [0, 0, 50, 50]}, "mobility.area"),          # the grid reaches 300 m
    ({"area": [0, 0, 400, 400], "speed_max_mps": 100, "speed_min_mps": 1}, None),
    ({"area": [0, 0, 60, 60], "nodes": [0], "speed_max_mps": 100}, "mobility.area"),
    ({"margin_m": 0, "nodes": [0]}, None),
])
def test_waypoint_area_is_checked_against_the_placement(mob, where):
    sc = scenario.from_dict({"mobility": dict({"model": "random_waypoint"}, **mob)})
    if where is None:
        Simulator(sc)
        return
    with pytest.raises(ScenarioError) as e:
        Simulator(sc)
    assert e.value.where == where


def test_default_area_of_a_single_board_is_refused_without_margin():
    sc = scenario.from_dict({"topology": {"kind": "positions", "positions": [[5, 5]]},
                             "mobility": {"model": "random_waypoint", "margin_m": 0}})
    with pytest.raises(ScenarioError) as e:
        Simulator(sc)
    assert e.value.where == "mobility.margin_m"
