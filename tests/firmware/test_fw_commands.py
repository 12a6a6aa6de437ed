"""What a host can send a board: malformed commands get error replies and never end the
host task; the bridge's queues stay bounded under a flood; the console interrupt."""
import os
import sys

import pytest

import e2e_run
from tinyssb import link
from tssbfw import app, config
from tssbfw.bridge import SerialBridge

MPY = os.path.join(os.path.dirname(sys.executable), "micropython")


def _check(rc, res):
    assert rc == 0, res
    assert res["answers_ok"] and res["board_kept"] and res["sf_saved"], res
    assert res["most_pending"] <= res["bound"] and res["per_poll"] == res["max_cmds"], res


@pytest.mark.skipif(not os.path.exists(MPY), reason="MicroPython unix port not installed")
def test_malformed_commands_and_floods_under_micropython(tmp_path):
    _check(*e2e_run.run(MPY, "e2e_commands.py", tmp_path / "w"))


def test_malformed_commands_and_floods_under_cpython(tmp_path):
    _check(*e2e_run.run(sys.executable, "e2e_commands.py", tmp_path / "w"))


def test_each_request_of_one_poll_gets_its_own_answer():
    inbox = [link.status_request(1) + link.status_request(2) + link.config_get(3, "plan")]
    out = bytearray()
    br = SerialBridge(lambda n: inbox.pop() if inbox else None, out.extend)
    for c in br.poll():
        br.reply(c, {"feeds": 0} if c[0] == "status" else "EU868.a")
    got = [(m[0], m[1]) for m in link.Decoder().feed(bytes(out))]
    assert got == [("status", 1), ("status", 2), ("reply", 3)]


def test_a_request_left_unanswered_is_forgotten_at_the_next_poll():
    inbox = [link.status_request(1)]
    br = SerialBridge(lambda n: inbox.pop() if inbox else None, lambda b: None)
    assert br.poll() == [("status",)]
    br.poll()
    assert br._asked == []


class _Cfg:
    """A firmware whose command() is the real one, with no radio or store behind it."""

    def __init__(self, root):
        self.fw = app.Firmware(None, None, None, None, cfg=dict(config.DEFAULTS), root=root)


def test_command_refuses_every_malformed_tuple(tmp_path):
    fw = _Cfg(str(tmp_path)).fw
    for cmd in [(), ("status", 1), ("config_set", "plan"), ("config_get", "a", "b"),
                (5,), ([1],), "status", None, ("send", 5), ("set_epoch", "soon"),
                ("set_epoch", -1), ("config_set", 7, 1), ("config_set_many", [1, 2]),
                ("config_get", "nosuchkey"), ("config_set", "board", 5)]:
        res = fw.command(cmd)
        assert isinstance(res, dict) and "error" in res, (cmd, res)
    assert not os.path.exists(str(tmp_path / "config.json"))     # nothing saved


def test_a_failing_save_is_an_error_reply_not_a_crash(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    fw = _Cfg(str(blocker)).fw                        # its root cannot hold a config
    res = fw.command(("config_set", "sf", 9))
    assert "error" in res and "Not a directory" in res["error"], res
    assert fw.cfg["sf"] is None                       # unchanged in RAM too


def test_config_set_many_takes_all_or_nothing(tmp_path):
    fw = _Cfg(str(tmp_path)).fw
    assert "error" in fw.command(("config_set_many", {"sf": 9, "power": 99}))
    assert fw.cfg["sf"] is None
    assert fw.command(("config_set_many", {"sf": 9, "name": "n2"})) == {"ok": True,
                                                                       "restart": True}
    cfg, _ = config.load(str(tmp_path))
    assert cfg["sf"] == 9 and cfg["name"] == "n2"


def test_repl_request_is_used_up_by_one_boot(tmp_path):
    root = str(tmp_path)
    assert not config.take_repl_request(root)
    fw = _Cfg(root).fw
    assert fw.command(("repl",)) == {"ok": True} and fw._after == "repl"
    assert config.take_repl_request(root)
    assert not config.take_repl_request(root)
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    assert "error" in _Cfg(str(blocked)).fw.command(("repl",))


def test_info_fits_one_link_reply_and_ages_frames_heard(tmp_path):
    import lora
    import machine
    from tssbfw.bridge import MemoryBridge
    from tssbfw.clock import Clock
    root = str(tmp_path / "node")
    config.save(root, {"plan": "US915.a", "board": "heltec-v2", "name": "i1", "ble": False})
    t = [1000]
    fw, _ = app.boot(root, lora_mod=lora, machine_mod=machine, bridge=MemoryBridge(),
                     clock=Clock(ticks_ms=lambda: t[0], ticks_diff=lambda a, b: a - b),
                     urandom=lambda n: b"\x09" * n)

    class Rx(bytearray):
        rssi = -101
        snr = -18
    frame = bytes(range(40))
    from tinyssb.frames import add_crc
    fw.on_rx(Rx(add_crc(frame)), 0)              # heard before the host set the clock
    t[0] += 4000
    fw.command(("set_epoch", 1767225600000))
    for i in range(6):
        t[0] += 1000
        fw.on_rx(Rx(add_crc(bytes([i + 1]) * 30)), 0)
    t[0] += 500
    d = fw.command(("info",))
    assert d["board"] == "heltec-v2" and d["plan"] == "US915.a" and d["power"] == 20
    assert d["feeds"] == 1 and d["entries"] == 0 and d["rx"] == 7
    assert [h[0] for h in d["heard"]] == [500, 1500, 2500, 3500, 4500]
    assert d["heard"][0][1:] == ["vector", 34, -101, -4.5]
    link.reply(1, d)                             # fits one reply (MAX_BODY)
    t[0] += 10 ** 9
    assert len(link.reply(1, fw.command(("info",)))) < link.MAX_BODY
