"""The demo's steps, run as `make demo` runs them (the Spark step has its own tests).

Shortened: the bridge step's board and host clocks run 4x faster than real time.
"""
import glob
import json
import os

import pytest
from tinyssb import crypto
from tinyssb.eventlog import VIRTUAL_EPOCH_MS
from tinyssb.node import Node
from tinyssb.store import MemStore
from tssb import demo
from tssb.context import Context
from tssb.sim.usb import UsbBoard
from tssb.store import open_store
from tssbfw import regions

DAY_MS = 86400000


def _events(path):
    return [json.loads(x) for x in open(path)]


def test_demo_mesh_bridge_hosts_steps(tmp_path, monkeypatch):
    seen = {}
    mesh_step = demo.mesh_step

    def keep_sim(*a, **kw):
        seen["sim"], r = mesh_step(*a, **kw)
        return seen["sim"], r
    monkeypatch.setattr(demo, "mesh_step", keep_sim)
    lines = []
    ok = demo.run(str(tmp_path), seed=3, say=lines.append, spark=False, bridge_scale=4)
    assert ok
    summary = json.load(open(os.path.join(tmp_path, "summary.json")))
    assert summary["mesh"]["ok"] and summary["mesh"]["delivery_ratio"] > 0

    # bridge: every entry and chunk of board 0, byte for byte, in host A's SQLite store
    board = seen["sim"].boards[0].store
    fids = list(board.feeds())
    entries = sum(board.front(f)[0] for f in fids)
    chunks = sum(board.chunk_count(f, s) for f in fids for s in range(1, board.front(f)[0] + 1))
    assert len(fids) == 3 and chunks > 0
    br = summary["bridge"]
    assert br["ok"] and br["identical"]
    assert (br["entries"], br["chunks"]) == (entries, chunks)
    assert br["frames_up"] > 0 and br["frames_down"] > 0 and br["bytes_up"] > 0
    a = open_store(os.path.join(tmp_path, "hosts", "hostA"))
    try:
        for f in fids:
            assert a.front(f)[0] == board.front(f)[0]
            for s in range(1, board.front(f)[0] + 1):
                assert a.entry(f, s) == board.entry(f, s)
                n = board.chunk_count(f, s)
                assert a.chunk_count(f, s) == n
                assert [a.chunk(f, s, k) for k in range(n)] == \
                    [board.chunk(f, s, k) for k in range(n)]
    finally:
        a.close()

    # host A's log: its node stored each entry and chunk (the bridge, before SETU), and
    # board 0's event lines came up the link
    ev_a = _events(os.path.join(tmp_path, "logs", "hostA.jsonl"))
    host_a = [e for e in ev_a if e["node"].startswith("host-")]
    start = min(i for i, e in enumerate(host_a) if e["event"] == "sync_start")
    before = host_a[:start]
    got = {(e["feed"], e["seq"]) for e in before if e["event"] == "append"}
    assert got == {(f.hex(), s) for f in fids for s in range(1, board.front(f)[0] + 1)}
    assert sum(e["event"] == "chunk" for e in before) == chunks
    assert any(e["node"] == "node00" and e["event"] == "tx" for e in ev_a)

    # one timeline: host logs continue the simulator's virtual clock, not the wall clock
    sim_end = max(e["ts"] for p in glob.glob(os.path.join(tmp_path, "logs", "node*.jsonl"))
                  for e in _events(p))
    ev_b = _events(os.path.join(tmp_path, "logs", "hostB.jsonl"))
    for e in ev_a + ev_b:
        assert sim_end <= e["ts"] < VIRTUAL_EPOCH_MS + DAY_MS

    hosts = summary["hosts"]
    assert hosts["ok"] and hosts["elements_sent"] > 0 and hosts["elements_recv"] > 0
    logs = sorted(os.listdir(os.path.join(tmp_path, "logs")))
    assert "hostA.jsonl" in logs and "hostB.jsonl" in logs and "node00.jsonl" in logs
    # both ends of the SETU session logged a successful ending
    for ev in (ev_a, ev_b):
        done = [e for e in ev if e["event"] == "sync_done"]
        assert len(done) == 1 and done[0]["proto"] == "setu" and done[0]["ok"]

    text = "\n".join(lines)
    assert "bridge: host A received %d entries and %d chunks from board 0 over a pty in" \
        % (entries, chunks) in text
    assert "hosts: both stores hold the same feeds: yes" in lines
    assert lines[-7] == "demo: summary"
    for label in ("mesh", "airtime", "bridge", "SETU", "report", "figures"):
        assert any(x.startswith("  " + label) for x in lines[-6:]), label
    assert lines[-1].endswith("summary.json")


class _SilentBoard(UsbBoard):
    """A board whose firmware never starts: the pty is there, nothing answers."""

    def start(self):
        pass


def test_bridge_step_fails_clearly_when_the_board_is_silent(tmp_path):
    seed = bytes(range(32))
    store = MemStore()
    Node(store, identity=(seed, crypto.publickey(seed))).post(b"never sent")
    board = _SilentBoard(store, None, regions.plan("US915.c"))
    ctx = Context.open(str(tmp_path / "hostA"))
    lines = []
    try:
        with pytest.raises(demo.BridgeError) as e:
            demo.bridge_step(ctx, board, timeout_s=1.0, say=lines.append)
    finally:
        ctx.close()
    msg = str(e.value)
    assert "0 of 1 entries" in msg and "never said HELLO" in msg
