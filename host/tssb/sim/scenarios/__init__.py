"""Bundled example scenarios (TOML package data; see tssb.sim.scenario_path)."""
