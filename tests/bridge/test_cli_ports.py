"""Live commands on a data directory, port auto-detection, board event sink."""
import json

import pytest

from tssb.bridge import ports
from tssb.bridge.runner import EventSink
from tssb.cli import main


def _run(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(["--init"] + list(argv))
    return e.value.code, capsys.readouterr().out


def test_post_feeds_status(tmp_path, capsys):
    home = str(tmp_path)
    code, out = _run(["post", "--home", home, "short"], capsys)
    assert code == 0 and "seq 1" in out
    code, out = _run(["post", "--home", home, "y" * 400], capsys)
    assert code == 0 and "seq 2" in out and "side chain" in out
    code, out = _run(["feeds", "--home", home, "--json"], capsys)
    rows = [json.loads(l) for l in out.splitlines()]
    assert len(rows) == 1 and rows[0]["entries"] == 2 and rows[0]["own"]
    assert rows[0]["chunks"] >= 4
    code, out = _run(["status", "--home", home, "--json"], capsys)
    st = json.loads(out)
    assert st["entries"] == 2 and st["feeds"] == 1
    code, out = _run(["logs", "--home", home, "--event", "append", "-n", "0"], capsys)
    assert [json.loads(l)["seq"] for l in out.splitlines()] == [1, 2]


def test_port_choice():
    cp = (0x10C4, 0xEA60)
    usb = [("/dev/ttyUSB0", cp[0], cp[1], "CP2102"), ("/dev/ttyS0", None, None, "")]
    assert ports.choose(None, usb) == "/dev/ttyUSB0"
    assert ports.choose("/dev/x", usb) == "/dev/x"
    with pytest.raises(ports.PortChoiceError) as e:
        ports.choose(None, usb + [("/dev/ttyACM0", 0x303A, 0x1001, "S3")])
    assert "/dev/ttyUSB0" in str(e.value) and "/dev/ttyACM0" in str(e.value)
    with pytest.raises(ports.PortChoiceError):
        ports.choose(None, [("/dev/ttyS0", None, None, ""), ("/dev/ttyUSB1", 1, 2, "x")])
    c = ports.candidates(usb)
    assert c[0][0] == "/dev/ttyUSB0" and c[0][2]   # with the boards it may be


def test_event_sink_validates(tmp_path):
    p = tmp_path / "ev.jsonl"
    s = EventSink(str(p), clock=lambda: 1700000000000)
    s('{"v":1,"event":"rx","ts":5,"kind":"goset","length":105}')
    s('{"v":1,"event":"tx","ts":0,"kind":"goset","length":105,"airtime_ms":1}')
    s('{"v":1,"event":"tx","ts":1600000000000,"kind":"goset","length":105,"airtime_ms":1}')
    s("not json")
    s("[1,2]")
    lines = [json.loads(l) for l in p.read_text().splitlines()]
    assert [l["event"] for l in lines] == ["rx", "tx", "tx"]
    # uptime-only stamps (board not yet given TIME) get the host's clock; real ones stay
    assert [l["ts"] for l in lines] == [1700000000000, 1700000000000, 1600000000000]
    assert s.bad == 2


def test_post_and_host_node_with_more_feeds_than_the_goset_holds(tmp_path, capsys):
    # An ordinary sync can bring more feeds than a GOSET holds (100); the host node must
    # still start: its GOSET holds the followed and the most recent ones (issue 15).
    from tssb.bridge.hostnode import HostNode
    from tssb.context import Context
    from tinyssb.goset import CAPACITY
    home = str(tmp_path)
    assert _run(["post", "--home", home, "first"], capsys)[0] == 0
    ctx = Context.open(home)
    fids = [bytes([i // 256, i % 256]) + bytes(30) for i in range(1, 151)]
    for f in fids:
        ctx.store.add_feed(f)
        ctx.store.append(f, 1, bytes(120), bytes(20))
    ctx.store.add_goset_key(fids[0])      # followed: in the set whatever its age
    ctx.close()
    code, out = _run(["post", "--home", home, "second"], capsys)
    assert code == 0 and "seq 2" in out
    ctx = Context.open(home)
    try:
        h = HostNode(ctx.store, ctx.identity, None)
        g = h.node.goset
        assert len(g) <= CAPACITY and ctx.identity.public in g and fids[0] in g
        assert len(ctx.store.feeds()) == 151
    finally:
        ctx.close()
