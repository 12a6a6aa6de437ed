"""Every event line the toolkit writes passes its own Spark schema.

The producers run for real, succeeding and failing: `tssb sync`, `dag sync` and `clock sync`
(and the services of the `tssb serve` they talk to), a sync to a peer that is not there,
`tssb post`, `dag post`, the web view's post, `tssb bridge` with a board running the
firmware (its own lines and the board's), and the simulator. Each line goes through
`tssb_spark.schema.verdict`, the ingest's own check (on main 41 of 88 lines of one host's
log were quarantined: the peer as HOST:PORT, `multi(levels=3,cutoff=8)`, empty and
free-text reasons).
"""
import glob
import json
import os
import socket

from conftest import Server, home_key, tssb
from tssb.context import Context
from tssb_spark import schema


def _lines(paths):
    out = []
    for p in paths:
        with open(p, encoding="utf-8") as f:
            out += [(p, line.rstrip("\n")) for line in f if line.strip()]
    return out


def _dead_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_every_producer_writes_lines_the_schema_accepts(tmp_path, board):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    assert tssb("id", "--home", a).code == 0 and tssb("id", "--home", b).code == 0
    ca, cb = Context.open(a), Context.open(b)
    cb.set_network_key(ca.network_key)
    server = Server(cb)
    gone = "127.0.0.1:%d" % _dead_port()
    ca.store.add_peer(cb.identity.public, "bee", server.addr)
    ca.store.add_peer(bytes(range(32)), "gone", gone)
    ca.close()
    try:
        assert tssb("post", "--home", a, "hello " * 30).code == 0
        root = tssb("dag", "post", "--home", a, "a root").out.split()[0]
        assert tssb("dag", "post", "--home", a, "--root", root, "a reply").code == 0
        assert tssb("sync", "--home", a, "--peer", server.addr).code == 0
        assert tssb("sync", "--home", a, "--peer", server.addr, "--profile", "tssb2").code == 0
        assert tssb("dag", "sync", "--home", a, "--peer", server.addr, "--root", root).code == 0
        assert tssb("dag", "sync", "--home", a, "--peer", server.addr, "--root", root,
                    "--variant", "basic").code == 0
        assert tssb("clock", "sync", "--home", a, "--peer", server.addr).code == 0
        for argv in (["sync"], ["clock", "sync"], ["dag", "sync", "--root", root]):
            r = tssb(*argv, "--home", a, "--peer", gone)
            assert r.code == 1, r
        ctx = Context.open(a)
        try:
            from tssb.web.view import WebView
            WebView(ctx).post(b"from the web view")
        finally:
            ctx.close()
        r = tssb("bridge", "--home", a, "--port", board.port, "--duration", "3")
        assert r.code == 0, r
        logs = str(tmp_path / "sim")
        scenario = tmp_path / "tiny.toml"
        scenario.write_text(
            'name = "tiny"\nduration_s = 60\n[topology]\nkind = "line"\nnodes = 3\n'
            'spacing_m = 100\n[authors]\nnodes = [0]\n[posts]\nper_author = 2\n'
            'sizes = [20, 300]\n')
        assert tssb("sim", scenario, "--logs", logs, "--quiet").code == 0
    finally:
        server.close()
        cb.close()
    lines = _lines(glob.glob(os.path.join(a, "logs", "events*")) +
                   glob.glob(os.path.join(b, "logs", "events*")) +
                   glob.glob(os.path.join(logs, "**", "*.jsonl*"), recursive=True))
    catalog = schema.Catalog()
    bad = []
    for path, line in lines:
        v = schema.verdict(line, catalog)
        if v == schema.UNSURE or v[1]:
            bad.append((os.path.basename(path), v if v == schema.UNSURE else v[1], line))
    assert not bad, "%d of %d lines fail the schema: %r" % (len(bad), len(lines), bad[:5])
    recs = [json.loads(line) for _, line in lines]
    done = [r for r in recs if r["event"] == "sync_done"]
    # every producer was there, succeeding and failing
    for proto in ("setu", "clock"):
        assert {r["ok"] for r in done if r["proto"] == proto} == {True, False}, proto
    assert any(r["ok"] for r in done if r["proto"] == "trdag")
    assert any(r.get("reason") == "connection refused" for r in done)
    assert {r["peer"] for r in done} <= {cb.identity.public.hex(), bytes(range(32)).hex(),
                                         home_key(a)}
    assert any(r.get("mode", "").startswith("multi-") for r in done if r["proto"] == "trdag")
    nodes = {r["node"] for r in recs}
    assert any(n.startswith("host-") for n in nodes) and "garden1" in nodes, nodes   # the board
    events = {r["event"] for r in recs}
    assert {"append", "sync_start", "sync_done", "rx", "tx"} <= events, events
