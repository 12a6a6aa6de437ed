"""The virtual board (`tssb vboard`, tssb.sim.vboard): the real firmware in the MicroPython
unix port on a pseudo-terminal, with the ESP32's console, used as a board is used.

- the console: a 0x03 byte (every host TX frame carries one) does not stop the firmware,
  while the same byte at the REPL interrupts as on an ESP32 (the emulation is live);
- a `tssb bridge` on the pty, and `info`, `status --board`, `config export/import/set` and
  `reboot --wait` through the bridge's control socket while it holds the port;
- the REPL on request (`reboot --repl`) and back; a board and a bridge host over UDP.
"""
import asyncio
import json
import os
import socket
import sys
import threading
import time

import pytest

from conftest import tssb
from tinyssb import link

MPY = os.path.join(os.path.dirname(sys.executable), "micropython")
pytestmark = pytest.mark.skipif(not os.path.exists(MPY) or
                                not os.path.exists("/proc/self/status"),
                                reason="needs the MicroPython unix port and Linux")

BOOT_S = 20.0      # generous: the machine is shared; a boot takes well under a second


class Running:
    """A VirtualBoard supervised in a thread, with its console lines collected."""

    def __init__(self, tmp, config=None, medium=None, name="vb"):
        from tssb.sim.vboard import VirtualBoard
        self.lines = []
        self.vb = VirtualBoard("heltec-v3", dict({"plan": "EU868.a", "name": name},
                                                 **(config or {})),
                               str(tmp / name), medium, say=self.lines.append)
        self.vb.start()
        self.port = self.vb.port_name
        self.errors = []
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        try:
            self.vb.run()
        except Exception as e:    # surfaced by the tests' asserts
            self.errors.append(e)

    def close(self):
        self.vb.close()
        self._t.join(5)


def _serial(port):
    from tssb.bridge.serial_link import open_no_reset
    return open_no_reset(port)


def _wait_for(s, dec, pred, limit=BOOT_S):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        for m in dec.feed(s.read(4096)):
            if pred(m):
                return m
    return None


def _text_seen(r, words, limit=BOOT_S):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if any(words in l for l in r.lines):
            return True
        time.sleep(0.05)
    return False


def test_ctrl_c_on_the_console_does_not_stop_the_firmware(tmp_path):
    r = Running(tmp_path)
    try:
        s = _serial(r.port)
        dec = link.Decoder()
        assert _wait_for(s, dec, lambda m: m[0] == "hello"), r.lines     # booted
        # a host TX frame carries 0x03 as its type; line noise may carry bare ones
        s.write(link.tx(bytes([3]) * 40) + b"\x03\x03" + link.status_request(9))
        st = _wait_for(s, dec, lambda m: m[0] == "status" and m[1] == 9, 10)
        assert st is not None, r.lines
        assert r.vb.counters["ctrl_c_passed"] >= 40 and r.vb.counters["interrupts"] == 0
        assert r.vb.resets == 0 and not r.errors
        # the emulation is live: at the REPL, running code, 0x03 interrupts it
        s.write(link.command(10, "repl"))
        assert _wait_for(s, dec, lambda m: m[0] == "reply" and m[1] == 10, 10)
        assert _text_seen(r, "firmware not started"), r.lines
        assert _text_seen(r, ">>>"), r.lines
        s.write(b"import time\r\ntime.sleep(60)\r\n")
        time.sleep(0.5)
        s.write(b"\x03")
        assert _text_seen(r, "KeyboardInterrupt", 10), r.lines
        assert r.vb.counters["interrupts"] == 1
        s.write(b"import machine\r\nmachine.reset()\r\n")        # back to the firmware
        assert _wait_for(s, dec, lambda m: m[0] == "hello"), r.lines
        s.close()
    finally:
        r.close()


def _bridge(home, stop, **kw):
    """`tssb bridge` of `home` (runner.run with `kw`) in a thread, until stop is set."""
    from tssb.bridge import runner
    from tssb.context import Context
    ctx = Context.open(home)

    async def main():
        task = asyncio.ensure_future(runner.run(ctx, say=lambda m: None, **kw))
        while not stop.is_set():
            await asyncio.sleep(0.05)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass

    def go():
        try:
            asyncio.run(main())
        finally:
            ctx.close()
    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


def _until(fn, limit=BOOT_S):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        out = fn()
        if out:
            return out
        time.sleep(0.2)
    return fn()


def test_bridge_info_config_and_reboot_through_the_bridge(tmp_path):
    from tssb.bridge import control
    home = str(tmp_path / "home")
    assert tssb("id", "--home", home).code == 0
    r = Running(tmp_path, name="vb2")
    stop = threading.Event()
    t = _bridge(home, stop, resolve=lambda: r.port)
    try:
        assert _until(lambda: os.path.exists(control.socket_path(home)))
        # no --port: the running bridge of this home holds the board
        info = _until(lambda: tssb("info", "--home", home, "--json"))
        got = _until(lambda: (lambda x: x.code == 0 and x)(tssb("info", "--home", home,
                                                                 "--json")))
        assert got, info
        d = json.loads(got.out)
        assert d["board"] == "heltec-v3" and d["name"] == "vb2" and d["plan"] == "EU868.a"
        assert d["region"]["duty_cycle_percent"] == 1.0 and d["power"] == 14
        assert d["heap"][0] > 0 and d["flash"][1] == 6 << 20 and d["feeds"] >= 1
        text = tssb("info", "--home", home)
        assert text.code == 0 and "1 % duty cycle" in text.out, text
        st = tssb("status", "--board", "--home", home, "--json")
        assert st.code == 0 and json.loads(st.out)["board"]["plan"] == "EU868.a", st
        exported = str(tmp_path / "board.json")
        assert tssb("config", "export", exported, "--home", home).code == 0
        assert tssb("config", "set", "sf", "9", "--home", home).code == 0
        rb = tssb("reboot", "--wait", "--home", home, "--json")
        assert rb.code == 0 and json.loads(rb.out)["back_s"] is not None, rb
        d = json.loads(tssb("info", "--home", home, "--json").out)
        assert d["sf"] == 9 and d["uptime_ms"] < 30000
        imp = tssb("config", "import", exported, "--home", home, "--json")
        assert imp.code == 0 and json.loads(imp.out)["restart"], imp
        assert tssb("config", "get", "sf", "--home", home).out.strip() == "null"
        # the bridge itself works as with a board: the board's event lines reach the log
        live = os.path.join(home, "logs", "events.jsonl.live")

        def logged():
            with open(live) as f:
                return any('"node": "vb2"' in l for l in f)
        assert _until(lambda: os.path.exists(live) and logged()), "no board events logged"
    finally:
        stop.set()
        t.join(10)
        r.close()
    # no bridge any more, and no board on USB: one line saying both
    gone = tssb("info", "--home", home)
    assert gone.code == 1 and "no `tssb bridge` runs in" in gone.err, gone
    assert not r.errors


def test_reboot_into_the_repl_and_back(tmp_path):
    r = Running(tmp_path, name="vb3")
    try:
        port = r.port
        assert _until(lambda: tssb("info", "--port", port, "--json").code == 0)
        res = tssb("reboot", "--repl", "--port", port)
        assert res.code == 0 and "REPL" in res.out, res
        assert _text_seen(r, "firmware not started"), r.lines
        off = tssb("info", "--port", port)
        assert off.code == 1 and "tssb reboot --repl" in off.err, off
        s = _serial(port)
        # info's frame began with 0x01 (the link version): Ctrl-A, the raw REPL; Ctrl-B
        # leaves it, as on a board
        s.write(b"\r\x02print(6 * 7)\r\n")
        assert _text_seen(r, "42", 10), r.lines
        s.write(b"\x04")                  # Ctrl-D at the REPL: a soft reset, main.py runs
        s.close()
        assert _until(lambda: tssb("info", "--port", port, "--json").code == 0)
    finally:
        r.close()


def _multicast_loopback_works(port):
    from tssb.bridge import udp
    try:
        socks = [udp.multicast_socket(udp.GROUP, port, "127.0.0.1") for _ in range(2)]
    except OSError:
        return False
    try:
        socks[0].sendto(b"probe", (udp.GROUP, port))
        time.sleep(0.2)
        try:
            return socks[1].recv(64) == b"probe"
        except OSError:
            return False
    finally:
        for s in socks:
            s.close()


def _free_udp_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_a_bridge_host_on_udp_reaches_the_board(tmp_path):
    from tssb.bridge import udp
    port = _free_udp_port()
    if not _multicast_loopback_works(port):
        pytest.skip("multicast between two sockets on loopback unavailable here")
    home = str(tmp_path / "host")
    assert tssb("id", "--home", home).code == 0
    assert tssb("post", "--home", home, "over the air").code == 0
    r = Running(tmp_path, medium=(udp.GROUP, port, "127.0.0.1"), name="vb4")
    stop = threading.Event()
    t = _bridge(home, stop, use_udp=True, udp_iface="127.0.0.1", udp_port=port)
    try:
        def board_has_it():
            res = tssb("info", "--port", r.port, "--json")
            return res.code == 0 and json.loads(res.out)["entries"] >= 1
        assert _until(board_has_it, 60), r.lines
    finally:
        stop.set()
        t.join(10)
        r.close()


def test_deploy_onto_a_running_firmware(tmp_path):
    # the firmware ignores Ctrl-C, which mpremote needs: deploy hands the console over
    r = Running(tmp_path, name="vb5")
    try:
        port = r.port
        assert _until(lambda: tssb("info", "--port", port, "--json").code == 0)
        res = tssb("deploy", "--board", "heltec-v3", "--plan", "EU868.b", "--port", port,
                   "--no-mip", "--name", "deployed1")
        assert res.code == 0 and "restarted the board into the MicroPython REPL" in res.out, \
            (res, r.lines)

        def redeployed():
            got = tssb("info", "--port", port, "--json")
            return got.code == 0 and json.loads(got.out)
        d = _until(redeployed)
        assert d and d["plan"] == "EU868.b" and d["name"] == "deployed1", r.lines
    finally:
        r.close()
