"""`tssb dm --wait` and `tssb post --wait` watched end to end: our host bridges a board
(the real firmware on a pseudo-terminal, tssb.sim.usb.UsbBoard), and a neighbour host is
on the board's radio (its frames reach the neighbour's node, the neighbour's reach the
board's radio). The post is written by `tssb dm|post --wait` in another process while
A's bridge runs. Every stage the wait reports is observed here, in the order it happens:
stored, on the board, asked for and fetched by the neighbour, its DLV and its ACK."""
import asyncio
import json
import subprocess
import sys
import threading

from tinyssb import crypto
from tinyssb.store import MemStore
from tssb.bridge import runner
from tssb.bridge.hostnode import HostNode
from tssb.chat.service import Service
from tssb.context import Context
from tssb.sim.usb import UsbBoard
from tssbfw import regions

from bridge_helpers import FAST, wait_for

WAIT_S = 120          # the --wait given; the run ends as soon as every stage was seen
BOARD_SEED = b"\x31" * 32


class Air:
    """The neighbour's radio port: what its node sends reaches the board's radio."""
    name = "air"

    def __init__(self, board):
        self.board = board

    def send(self, pkt):
        self.board.hear(pkt)


def _wire_board_to(board, loop, hostnode, port):
    """Every frame the board puts on air also reaches the neighbour (in its loop)."""
    send = board.modem.send

    async def send_and_tell(frame):
        await send(frame)
        loop.call_soon_threadsafe(hostnode.receive, bytes(frame[:-4]), port,
                                  {"rssi": -80, "snr": 7.0})
    board.modem.send = send_and_tell


def _tssb(home, *argv):
    """`tssb ARGV --home HOME` in a subprocess, its stdout read line by line."""
    p = subprocess.Popen([sys.executable, "-m", "tssb"] + list(argv) + ["--home", home],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []

    def read():
        for line in p.stdout:
            lines.append(line.rstrip("\n"))
    threading.Thread(target=read, daemon=True).start()
    return p, lines


def _run_mesh(tmp_path, argv, recipient_reads=True):
    """Bring up the board, A's bridge and the neighbour B, then run `tssb ARGV --wait` on
    home A in another process while A's bridge runs. Returns (its exit status, the JSON
    objects it printed after the first, B's key)."""
    a_home, b_home = str(tmp_path / "a"), str(tmp_path / "b")
    a, b = Context.open(a_home), Context.open(b_home)
    b_key = b.identity.public
    argv = [x.replace("{b}", b_key.hex()) for x in argv]
    proc, lines = None, []

    async def mesh():
        nonlocal proc, lines
        loop = asyncio.get_running_loop()
        board = UsbBoard(MemStore(), (BOARD_SEED, crypto.publickey(BOARD_SEED)),
                         regions.plan("EU868.a"), "board1", scale=4)
        hb = HostNode(b.store, b.identity, timing=FAST)
        air = Air(board)
        hb.attach(air)
        _wire_board_to(board, loop, hb, air)
        svc_b = Service(b, hb)           # B sends its DLV as the message is stored
        board.start()
        tasks = [asyncio.ensure_future(hb.run()), asyncio.ensure_future(svc_b.run(0.3)),
                 asyncio.ensure_future(runner.run(a, lambda: board.port_name,
                                                  say=lambda s: None))]
        try:
            # A's bridge is up (the board took packets of A's node): the post is written
            # by another process while the bridge runs
            assert await wait_for(lambda: board.bridge.counters["host_pkts"] > 0, 30)
            proc, lines = _tssb(a_home, *argv, "--wait", "%ds" % WAIT_S, "--json")
            assert await wait_for(lambda: len(lines) >= 2 or proc.poll() is not None, 30)
            assert len(lines) >= 2, (lines, proc.stderr.read())
            assert json.loads(lines[1])["stage"] == "stored"
            if recipient_reads:
                # B reads the message (as `tssb read` would): its ACK goes through its node
                ib = svc_b.inbox

                # once its DLV went out (stored here), as a reader comes to it later
                def got():
                    ib.refresh()
                    return _opened(ib, b, a.identity.public) if b.store.front(
                        b.identity.public)[0] else []
                assert await wait_for(lambda: got() or proc.poll() is not None, WAIT_S)
                ib.mark_read(got(), hb.post)
            await wait_for(lambda: proc.poll() is not None, WAIT_S + 10)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            board.stop()
    try:
        asyncio.run(mesh())
    finally:
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        a.close()
        b.close()
    stages = [json.loads(x) for x in lines[1:]]
    return proc.returncode, stages, b_key


def _opened(ib, ctx, author):
    from tssb import posts
    out = []
    for key, _, _ in ib.chats():
        for fid, seq in ib.chat_entries(key):
            if bytes(fid) == author:
                out.append(posts.read(ctx.store, author, seq, ib.keys))
    return out


def test_dm_wait_sees_every_stage_from_store_to_read(tmp_path):
    code, stages, b_key = _run_mesh(tmp_path, ["dm", "{b}", "meet at the lake at six"])
    summary = stages[-1]
    seen = [s["stage"] for s in stages[:-1]]
    assert summary["done"] and code == 0, stages
    assert set(seen) == {"stored", "board", "announced", "fetched", "delivered", "read"}, seen
    assert seen[0] == "stored"
    by = {s["stage"]: s for s in stages[:-1]}
    assert by["board"]["source"] == "board"
    assert by["fetched"]["source"] == by["announced"]["source"] == "air"
    assert by["delivered"]["recipient"] == by["read"]["recipient"] == b_key.hex()
    # each as it was seen: the board had it before its receipts could come back, and B
    # read it after its DLV went out. (A neighbour's WANT is understood once our node
    # knows the set it is keyed by: "fetched" may be seen after the DLV, never invented.)
    order = [s["stage"] for s in stages[:-1]]
    assert order.index("board") < order.index("delivered") < order.index("read")
    assert order.index("announced") <= order.index("fetched")


def test_post_wait_sees_a_public_post_fetched(tmp_path):
    code, stages, _ = _run_mesh(tmp_path, ["post", "hello mesh"], recipient_reads=False)
    seen = [s["stage"] for s in stages[:-1]]
    assert code == 0 and stages[-1]["done"], stages
    assert seen[0] == "stored" and set(seen) == {"stored", "board", "announced", "fetched"}
