"""LoRa mesh simulator: the real node and firmware scheduling code on a virtual channel.

    from tssb.sim import scenario, Simulator
    sim = Simulator(scenario.load("mesh.toml"), logdir="out/logs")
    summary = sim.run()

Modules: phy (link budget, sensitivity, capture with summed interference), topology
(placements), mobility (random waypoint positions over time), scenario (TOML loader),
board (one simulated board around the firmware classes), runner (event loop).
"""
from tssb.sim.errors import ScenarioError
from tssb.sim.runner import Simulator
from tssb.sim import scenario

__all__ = ["ScenarioError", "Simulator", "scenario", "scenario_path"]


def scenario_path(name):
    """Path of a bundled example scenario (host/tssb/sim/scenarios/NAME.toml)."""
    import os
    return os.path.join(os.path.dirname(__file__), "scenarios", name + ".toml")
