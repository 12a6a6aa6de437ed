"""The demo's steps, run as `make demo` runs them (the Spark step has its own tests)."""
import json
import os

from tssb import demo


def test_demo_mesh_and_hosts_steps(tmp_path):
    lines = []
    ok = demo.run(str(tmp_path), seed=3, say=lines.append, spark=False)
    assert ok
    summary = json.load(open(os.path.join(tmp_path, "summary.json")))
    assert summary["mesh"]["ok"] and summary["mesh"]["delivery_ratio"] > 0
    hosts = summary["hosts"]
    assert hosts["ok"] and hosts["elements_sent"] > 0 and hosts["elements_recv"] > 0
    logs = sorted(os.listdir(os.path.join(tmp_path, "logs")))
    assert "hostA.jsonl" in logs and "hostB.jsonl" in logs and "node00.jsonl" in logs
    done = [json.loads(x) for x in open(os.path.join(tmp_path, "logs", "hostB.jsonl"))]
    assert any(e["event"] == "sync_done" and e["proto"] == "setu" and e["ok"] for e in done)
    assert any(line.startswith("hosts: both stores hold the same feeds: yes") for line in lines)
