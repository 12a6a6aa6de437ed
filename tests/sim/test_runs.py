"""Whole runs: convergence, determinism, duty cycle, event logs, scenarios, CLI, demo."""
import json
import os
import random

import pytest

from tssb import demo
from tssb.cli import main as cli_main
from tssb.sim import ScenarioError, Simulator, scenario, scenario_path, topology
from tssbfw import regions


def small():
    return scenario.load(scenario_path("small"))


def read_logs(d):
    return {n: open(os.path.join(d, n)).read() for n in sorted(os.listdir(d))}


def test_small_scenario_converges_and_stores_agree():
    sim = Simulator(small())
    s = sim.run()
    assert s["converged"] and sim.converged()
    assert s["posts"] == 2
    # every post reached every board, and no later than the run's end
    for p in sim.posts:
        assert sorted(p["done"]) == list(range(sim.n))
        assert max(p["done"].values()) <= s["converge_ms"]
    assert sum(s["airtime_share"].values()) == pytest.approx(1.0)
    assert s["delivery"]["delivered"] + sum(s["delivery"]["lost"].values()) == s["delivery"]["attempts"]


def test_side_chained_post_arrives_with_all_its_chunks():
    sim = Simulator(small())
    sim.run()
    long_post = [p for p in sim.posts if p["size"] > 48][0]
    assert long_post["chunks"] >= 2
    fid = bytes.fromhex(long_post["feed"])
    for b in sim.boards:
        assert b.store.chunk_count(fid, long_post["seq"]) == long_post["chunks"]


@pytest.mark.parametrize("deployed", ["none", "middle", "all", "alternate"])
def test_mixed_meshes_converge(deployed):
    # deployed-behaviour boards (the ESP32 GOSET algorithm and timers) next to ours
    sc = scenario.load(scenario_path("small" if deployed != "alternate" else "demo"))
    n = sc["topology"]["nodes"]
    sc["deployed"] = {"none": [], "middle": [1, 2], "all": list(range(n)),
                      "alternate": list(range(0, n, 2))}[deployed]
    sim = Simulator(sc)
    s = sim.run()
    assert s["converged"] and sim.converged()
    feeds = set(bytes.fromhex(p["feed"]) for p in sim.posts)
    for b in sim.boards:
        c = b.node.counters
        assert c.get("drop_internal_error", 0) == 0
        assert set(b.node.goset.keys) == feeds       # no key nobody announced
        if b.deployed:
            # extension packets are unknown to it and ignored; nothing of ours is misread
            assert not [k for k in c if k.startswith("drop_") and k != "drop_unknown_dmx"]
            assert b.node.ext is None
    if deployed == "all":
        assert not any(k in s["by_kind"] for k in ("beacon", "reply", "symbols", "keys"))


def test_demo_scenario_converges():
    sim = Simulator(scenario.load(scenario_path("demo")))
    s = sim.run()
    assert s["converged"] and sim.converged()
    assert s["nodes"] == 12 and s["posts"] == 12
    assert 0 < s["delivery"]["ratio"] < 1   # dense enough that frames collide


def test_same_seed_gives_identical_logs(tmp_path):
    Simulator(small(), logdir=str(tmp_path / "a")).run()
    Simulator(small(), logdir=str(tmp_path / "b")).run()
    a = read_logs(tmp_path / "a")
    assert a == read_logs(tmp_path / "b")
    other = small()
    other["seed"] = 8
    Simulator(other, logdir=str(tmp_path / "c")).run()
    assert a != read_logs(tmp_path / "c")


def test_logs_follow_the_event_schema(tmp_path):
    Simulator(small(), logdir=str(tmp_path)).run()
    kinds = set()
    for name, text in read_logs(tmp_path).items():
        for line in text.splitlines():
            ev = json.loads(line)
            assert ev["v"] in (1, 2) and ev["node"] + ".jsonl" == name
            kinds.add(ev["event"])
            if ev["event"] == "tx":
                assert ev["airtime_ms"] > 0
            if ev["event"] == "rx":
                assert "rssi" in ev and "snr" in ev and ev["airtime_ms"] > 0
    assert {"tx", "rx", "append", "goset"} <= kinds


def test_eu868_duty_cycle_is_enforced_by_the_firmware_limiter():
    sc = scenario.load(scenario_path("demo"))
    sc["plan"] = regions.plan("EU868.a")   # 125 kHz: the demo traffic exceeds 1 %
    sc["duration_ms"] = 3600 * 1000
    sc["stop_when_converged"] = False
    sim = Simulator(sc)
    s = sim.run()
    budget = sc["plan"]["limits"]["duty_permille"] * 3600 * 1000 // 1000
    assert s["sched"]["limited"] > 0
    assert max(b.tx_airtime_ms for b in sim.boards) <= budget
    # and the limit binds: some board used most of its budget
    assert max(b.tx_airtime_ms for b in sim.boards) > budget * 0.9


def test_random_geometric_placement_is_connected_and_deterministic():
    a = topology.random_geometric(30, 500, random.Random(1), link_m=150)
    b = topology.random_geometric(30, 500, random.Random(1), link_m=150)
    assert a == b and topology.connected(a, 150)
    with pytest.raises(ScenarioError):
        topology.random_geometric(30, 100000, random.Random(1), link_m=10)


def test_line_and_grid_hops():
    sc = scenario.from_dict({"topology": {"kind": "line", "nodes": 5, "spacing_m": 200},
                             "radio": {"shadowing_sigma_db": 0}})
    sim = Simulator(sc)
    assert sim.hops(0) == [0, 1, 2, 3, 4]   # 200 m: neighbours only (range ~264 m)
    assert topology.grid(5, 2, 10) == [(0, 0), (10, 0), (0, 10), (10, 10), (0, 20)]


@pytest.mark.parametrize("bad,where", [
    ({"colour": 1}, "colour"),
    ({"region": "XX"}, "region"),
    ({"topology": {"kind": "ring"}}, "topology.kind"),
    ({"topology": {"nodes": 0}}, "topology.nodes"),
    ({"topology": {"kind": "positions", "positions": [[0]]}}, "topology.positions"),
    ({"authors": {"nodes": [12]}}, "authors.nodes"),
    ({"authors": {"nodes": [1, 1]}}, "authors.nodes"),
    ({"posts": {"sizes": [0]}}, "posts.sizes"),
    ({"posts": {"per_author": 100000}}, "posts.per_author"),
    ({"radio": {"loss": 2}}, "radio.loss"),
    ({"duration_s": -1}, "duration_s"),
    ({"seed": "x"}, "seed"),
    ({"boot_spread_s": -1}, "boot_spread_s"),
    ({"boot_spread_s": 40, "posts": {"start_s": 30}}, "boot_spread_s"),
])
def test_bad_scenarios_are_refused_with_the_key(bad, where):
    with pytest.raises(ScenarioError) as e:
        scenario.from_dict(bad)
    assert e.value.where == where


def test_bad_toml_is_a_scenario_error(tmp_path):
    p = tmp_path / "x.toml"
    p.write_text("name = [\n")
    with pytest.raises(ScenarioError):
        scenario.load(str(p))


def test_cli_runs_a_small_scenario(capsys, tmp_path):
    with pytest.raises(SystemExit) as e:
        cli_main(["sim", "small", "--logs", str(tmp_path), "--quiet"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "converged after" in out and "delivery ratio" in out and "want" in out
    assert len(os.listdir(tmp_path)) == 4


def test_cli_reports_a_bad_scenario(capsys, tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("[topology]\nkind = 'ring'\n")
    with pytest.raises(SystemExit) as e:
        cli_main(["sim", str(p)])
    assert e.value.code == 2
    assert "topology.kind" in capsys.readouterr().err


def test_demo_mesh_step_writes_logs_and_figures(tmp_path):
    lines = []
    _, r = demo.mesh_step(str(tmp_path), seed=1, say=lines.append)
    assert r["ok"] and r["converge_ms"] > r["goset_ms"] > 0
    assert 0 < r["delivery_ratio"] < 1
    assert sum(r["airtime_share"].values()) == pytest.approx(1.0)
    assert any("airtime share" in s for s in lines)
    assert any("delivery ratio" in s for s in lines)
    logs = read_logs(tmp_path / "logs")
    assert len(logs) == 12
    events = [json.loads(x) for t in logs.values() for x in t.splitlines()]
    assert any(e["event"] == "tx" and "airtime_ms" in e for e in events)
    assert any(e["event"] == "rx" and "rssi" in e and "snr" in e for e in events)
