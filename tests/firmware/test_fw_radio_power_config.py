import asyncio

import pytest

from tinyssb.frames import add_crc
from tssbfw import config, power, regions
from tssbfw.radio import RadioPort, kind_of


class Ev:
    def __init__(self):
        self.items = []

    def emit(self, event, **f):
        self.items.append((event, f))


def test_accept_checks_crc_and_lengths():
    import lora
    ev = Ev()
    port = RadioPort(regions.plan("US915.a"), ev)
    pkt = bytes(range(120))
    frame = add_crc(pkt)
    assert port.accept(lora.RxPacket(frame, 0, -20, -90, True)) == pkt
    bad = bytearray(frame)
    bad[10] ^= 1
    assert port.accept(lora.RxPacket(bad)) is None
    assert port.accept(lora.RxPacket(frame, valid_crc=False)) is None
    assert port.accept(b"\x00" * 11) is None
    assert port.accept(b"\x00" * 128) is None
    assert port.counters["bad_crc"] == 1 and port.counters["radio_crc"] == 1
    assert port.counters["frame_too_short"] == 1 and port.counters["frame_too_long"] == 1
    assert port.counters["rx"] == 1
    rx = [f for e, f in ev.items if e == "rx"][0]
    assert rx["length"] == 124 and rx["snr"] == -5 and rx["rssi"] == -90
    assert rx["airtime_ms"] == 206 and rx["kind"] == "pkt120"
    assert [f["reason"] for e, f in ev.items if e == "drop"] == \
        ["bad_crc", "radio_crc", "frame_too_short", "frame_too_long"]


def test_tx_and_rx_name_the_same_packet():
    import hashlib
    import lora
    from tssb.sim.board import RxFrame
    sender, receiver = Ev(), Ev()
    pkt = bytes(range(40))
    RadioPort(regions.plan("US915.a"), sender).sent(add_crc(pkt))
    port = RadioPort(regions.plan("US915.a"), receiver)
    port.accept(lora.RxPacket(add_crc(pkt), 0, -20, -90, True))   # a board: sender unknown
    port.accept(RxFrame(add_crc(pkt), -90, 5.0, "node03"))        # the simulated channel
    tx = sender.items[0][1]
    rx1, rx2 = [f for e, f in receiver.items if e == "rx"]
    assert tx["pkt"] == rx1["pkt"] == rx2["pkt"] == hashlib.sha256(pkt).hexdigest()[:16]
    assert "src" not in rx1 or rx1["src"] is None
    assert rx2["src"] == "node03"


def test_kind_of():
    assert kind_of(b"\x61\x3d\xfa\x70\xc4\x7a\xba" + b"c" * 98) == "goset"
    assert kind_of(b"x" * 120) == "pkt120"
    assert kind_of(b"x" * 20) == "vector"


def test_sync_modem_wrapper_receives():
    import fakeradio
    import lora
    import machine
    ether = fakeradio.Ether()
    cfg = regions.lora_cfg(regions.plan("US915.a"))
    mk = lambda: lora.SX1262(machine.SPI(1, sck=machine.Pin(9), mosi=machine.Pin(10),
                                         miso=machine.Pin(11)), machine.Pin(8),
                             busy=machine.Pin(13), lora_cfg=cfg, ether=ether)
    from tssbfw.radio import SyncModem
    a, b = SyncModem(mk()), SyncModem(mk())

    async def go():
        await a.send(b"hello world!")
        return await b.recv()
    assert bytes(asyncio.run(go())) == b"hello world!"


def test_axp192_power_up_sets_ldo2():
    import machine
    import tssb_boards
    machine.I2C_DEVICES[0x34] = machine.I2CDevice({0x12: 0x41, 0x28: 0x0A})
    assert power.power_up(tssb_boards.get("tbeam"), machine) == "axp192 ldo2 3300 mV"
    regs = machine.I2C_DEVICES[0x34].regs
    assert regs[0x12] == 0x45          # LDO2 on, other rails untouched
    assert regs[0x28] == 0xFA          # LDO2 3.3 V, LDO3 bits untouched
    del machine.I2C_DEVICES[0x34]
    with pytest.raises(OSError):       # no PMU answering
        power.power_up(tssb_boards.get("tbeam"), machine)


def test_vext_active_low():
    import machine
    import tssb_boards
    machine.LOG.clear()
    power.power_up(tssb_boards.get("heltec-v3"), machine)
    assert ("pin_value", 36, 0) in machine.LOG
    assert power.power_up(tssb_boards.get("t3s3"), machine) == "none"


def test_ldo2_code_range():
    assert power.ldo2_code(1800) == 0 and power.ldo2_code(3300) == 15
    for bad in (1700, 3400, 2550):
        with pytest.raises(ValueError):
            power.ldo2_code(bad)


def test_config_defaults_validation_and_atomic_save(tmp_path):
    root = str(tmp_path / "cfg")
    cfg, problems = config.load(root)
    assert cfg["plan"] is None and problems == ["no config, using defaults"]   # no default
    config.save(root, {"plan": "EU868.b", "board": "t3s3", "name": "n1"})
    cfg, problems = config.load(root)
    assert (cfg["plan"], cfg["board"], cfg["name"], problems) == ("EU868.b", "t3s3", "n1", [])
    with pytest.raises(ValueError):
        config.save(root, {"plan": "XX"})
    with open(root + "/config.json", "w") as f:
        f.write('{"plan": "XX", "tick_ms": 1, "board": "heltec-v3"}')
    cfg, problems = config.load(root)
    assert cfg["plan"] is None and cfg["tick_ms"] == 100 and cfg["board"] == "heltec-v3"
    assert len(problems) == 2
    with open(root + "/config.json", "w") as f:
        f.write("{not json")
    cfg, problems = config.load(root)
    assert cfg == config.DEFAULTS and problems[0].startswith("unreadable config")


def test_identity_created_once(tmp_path):
    root = str(tmp_path)
    calls = []

    def rnd(n):
        calls.append(n)
        return b"\x07" * n
    from tinyssb import crypto
    seed, pub, created = config.load_identity(root, crypto.publickey, rnd)
    assert created and seed == b"\x07" * 32 and pub == crypto.publickey(seed)
    seed2, pub2, created2 = config.load_identity(root, crypto.publickey, rnd)
    assert (seed2, pub2, created2) == (seed, pub, False) and calls == [32]


def test_power_and_sf_keys_override_the_plan_within_the_band():
    assert config.check("power", 10) == 10 and config.check("sf", 9) == 9
    assert config.check("power", None) is None and config.check("sf", None) is None
    for key, bad in (("power", 23), ("power", -10), ("power", True), ("power", "10"),
                     ("sf", 6), ("sf", 13), ("sf", 7.0)):
        with pytest.raises(ValueError):
            config.check(key, bad)
    p = regions.plan("EU868.a", power=20, sf=9)
    assert p["sf"] == 9 and p["power"] == 14          # ETSI band M caps at 14 dBm
    assert regions.plan("US915.a", power=5)["power"] == 5
    assert regions.plan("US915.a")["sf"] == 7 and regions.plan("US915.a")["power"] == 20
    assert regions.lora_cfg(regions.plan("AU915.a", sf=12))["sf"] == 12
