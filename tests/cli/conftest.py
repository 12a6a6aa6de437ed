"""The CLI tests' world: homes, a session server, a board on a pseudo-terminal.

The board is the real firmware (tssbfw.app.boot over the fake radio and machine modules
of tests/firmware/fakes) behind its SerialBridge on a pty, answering STATUS, CFG_GET and
CFG_SET as a deployed board does; the server is tssb.session on loopback in a thread.
"""
import asyncio
import contextlib
import io
import os
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FAKES = os.path.join(ROOT, "tests", "firmware", "fakes")
if FAKES not in sys.path:
    sys.path.append(FAKES)


class Result:
    def __init__(self, code, out, err):
        self.code, self.out, self.err = code, out, err

    def __repr__(self):
        return "Result(%r, out=%r, err=%r)" % (self.code, self.out[-400:], self.err[-400:])


def tssb(*argv, stdin=None):
    """Run `tssb ARGV` in this process; returns Result(exit status, stdout, stderr)."""
    from tssb.cli import main
    out, err = io.StringIO(), io.StringIO()
    old_in = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main([str(a) for a in argv])
                code = 0
            except SystemExit as e:
                code = e.code
    finally:
        sys.stdin = old_in
    return Result(code, out.getvalue(), err.getvalue())


STARTUP_S = 30.0     # a subprocess has this long to get to the point of interest


def spawn(*argv):
    """`tssb ARGV` in a process of its own (stdout and stderr piped)."""
    import subprocess
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "tssb"] + [str(a) for a in argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def wait_stderr(p, words):
    """Read the process's stderr until a line holds `words`; returns the lines read."""
    lines = []
    end = time.monotonic() + STARTUP_S
    while time.monotonic() < end:
        line = p.stderr.readline().decode()
        if not line:
            break
        lines.append(line)
        if words in line:
            return lines
    p.kill()
    raise AssertionError("never saw %r: %r" % (words, lines))


class FakeBoard:
    """The firmware on a pty: commands answered as the board's host loop does."""

    def __init__(self, root):
        import lora
        import machine
        from tinyssb.frames import add_crc
        from tssb.sim.usb import Pty
        from tssbfw import app, config
        from tssbfw.bridge import SerialBridge
        config.save(root, {"plan": "EU868.a", "board": "heltec-v3", "name": "garden1",
                           "ble": False})
        self.pty = Pty()
        self.port = self.pty.name
        self.bridge = SerialBridge(self.pty.read, self.pty.write, "garden1")
        self.fw, _ = app.boot(root, lora_mod=lora, machine_mod=machine, bridge=self.bridge,
                              urandom=lambda n: b"\x07" * n)
        self.bridge.attach(self.fw)
        self._add_crc = add_crc
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        t0 = time.monotonic()
        while not self._stop.is_set():
            for cmd in self.bridge.poll():
                if cmd[0] != "send":
                    self.bridge.reply(cmd, self.fw.command(cmd))
            now = int((time.monotonic() - t0) * 1000)
            for p in self.fw.link.tick(now):       # its claims, as if sent on air
                self.bridge.on_radio_tx(self._add_crc(p))
            time.sleep(0.005)

    def stop(self):
        self._stop.set()
        self._t.join(5)


class Server:
    """A `tssb serve` of home B in a thread (open to any peer with the network key)."""

    def __init__(self, ctx, open_mode=True):
        from tssb.session import PeerPolicy, start_server
        self.loop = asyncio.new_event_loop()
        self._t = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._t.start()
        policy = PeerPolicy.from_context(ctx, open_mode=open_mode)
        self.srv = asyncio.run_coroutine_threadsafe(
            start_server(ctx, "127.0.0.1", 0, policy=policy), self.loop).result(10)
        self.addr = "127.0.0.1:%d" % self.srv.port

    def close(self):
        asyncio.run_coroutine_threadsafe(self.srv.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._t.join(10)


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    b = FakeBoard(str(tmp_path_factory.mktemp("board") / "flash"))
    yield b
    b.stop()


def two_homes(tmp_path):
    """Homes A and B sharing a network key, B serving in a thread, A listing B as "bee" at
    its address. Returns (a, b, B's open Context, Server): close both when done."""
    from tssb.context import Context
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    assert tssb("id", "--home", a).code == 0 and tssb("id", "--home", b).code == 0
    ca, cb = Context.open(a), Context.open(b)
    cb.set_network_key(ca.network_key)
    server = Server(cb)
    ca.store.add_peer(cb.identity.public, "bee", server.addr)
    ca.close()
    return a, b, cb, server


def home_key(home):
    """The hex public key (= own feed id) of a home."""
    from tssb.context import Context
    ctx = Context.open(home)
    try:
        return ctx.identity.public.hex()
    finally:
        ctx.close()
