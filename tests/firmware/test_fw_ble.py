"""The BLE port (tssbfw.ble) on the fake `bluetooth` stack: the deployed service layout,
write sizes, the ring, misbehaving and surplus clients, MTU, status, config; and the
phone <-> board <-> board run under MicroPython and CPython (e2e_ble.py)."""
import os
import sys

import pytest

import androidapp
import e2e_run
import bluetooth
from tinyssb.node import Node
from tinyssb.store import MemStore
from tinyssb import crypto
from tssbfw import ble, config
from tssbfw.bridge import MemoryBridge

MPY = os.path.join(os.path.dirname(sys.executable), "micropython")
SEED = b"\x05" * 32

# The deployed facts (config.h, io.cpp, Constants.kt, BlePeers.kt), spelled out again here
# so a change to the module's constants cannot pass unnoticed.
SERVICE = "6e400001-7646-4b5b-9a50-71becce51558"
RX = "6e400002-7646-4b5b-9a50-71becce51558"
TX = "6e400003-7646-4b5b-9a50-71becce51558"
ST = "6e400004-7646-4b5b-9a50-71becce51558"
NAME = "6e400002-7646-4b5b-9a50-71becce51559"


def boot(tmp_path, **cfg):
    import lora
    import machine
    from tssbfw import app
    bluetooth.reset()
    root = str(tmp_path / "node")
    c = {"plan": "US915.a", "board": "heltec-v3", "name": "t1"}
    c.update(cfg)
    config.save(root, c)
    bridge = MemoryBridge()
    fw, problems = app.boot(root, lora_mod=lora, machine_mod=machine, bridge=bridge,
                            urandom=lambda n: SEED[:n])
    return fw, problems, bridge


class Capture:
    """Stands in for the node link: records what the port hands over."""

    def __init__(self, replies=()):
        self.got = []
        self.replies = list(replies)

    def on_packet(self, pkt, now):
        self.got.append(pkt)
        return self.replies


def handle(uuid):
    """The value handle of a characteristic or descriptor on the fake stack."""
    return [h for h, a in bluetooth.BLE().attrs.items() if a.uuid == bluetooth.UUID(uuid)][0]


def connect(mtu=128, addr=b"\x5a\x00\x00\x00\x00\x09"):
    c = bluetooth.Central(addr=addr)
    c.connect()
    if mtu:
        c.exchange_mtu(mtu)
    return c


def test_service_layout_is_the_deployed_one(tmp_path):
    fw, problems, _ = boot(tmp_path)
    port = fw.faces[0]
    stack = bluetooth.BLE()
    assert stack.active() and stack.config("mtu") == 128
    assert stack.config("gap_name") == b"tinySSB-" + ("%02x%02x" % (fw.link.node.author.fid[0],
                                                                     fw.link.node.author.fid[1])).encode()
    c = connect()
    ((suuid, chars),) = c.discover()
    assert suuid == bluetooth.UUID(SERVICE)
    layout = [(u, p, [d for d, _ in descs]) for u, p, _, descs in chars]
    R, W, N = bluetooth.FLAG_READ, bluetooth.FLAG_WRITE, bluetooth.FLAG_NOTIFY
    assert layout == [(bluetooth.UUID(TX), R | N, [bluetooth.UUID(0x2902)]),
                      (bluetooth.UUID(ST), R | N, [bluetooth.UUID(0x2902)]),
                      (bluetooth.UUID(RX), W, [bluetooth.UUID(NAME)])]
    name_handle = chars[2][3][0][1]
    assert c.read(name_handle) == fw.link.node.author.fid          # 32-byte public key
    with pytest.raises(OSError):
        c.read(chars[2][2])                                        # RX is write-only
    with pytest.raises(OSError):
        c.write(chars[0][2], b"x" * 10)                            # TX is not writable
    # advertising: the service UUID (little-endian, AD type 0x07) and the name
    adv, resp = stack.adv[1], stack.adv[2]
    assert len(adv) <= 31 and len(resp) <= 31
    assert androidapp.advertises(adv, SERVICE)
    assert adv[3:5] == b"\x11\x07" and adv[5:21] == bytes(reversed(bytes.fromhex(
        SERVICE.replace("-", ""))))
    assert androidapp.ad_fields(resp)[0x09] == [port.adv_name.encode()]
    assert problems == ["created identity"]


def test_one_packet_per_write_exactly_as_written(tmp_path):
    fw, _, _ = boot(tmp_path)
    port = fw.faces[0]
    port.fw.link = cap = Capture()
    c = connect()
    rx = handle(RX)
    sizes = (1, 7, 20, 21, 105, 120, 125, 127)
    for n in sizes:
        c.write(rx, bytes([n]) * n)
        port.drain(0, limit=1)
    assert cap.got == [bytes([n]) * n for n in sizes]   # nothing cut at 20 bytes or merged
    assert port.counters["rx"] == len(sizes)


def test_malformed_and_oversized_writes_are_dropped_and_counted(tmp_path):
    fw, _, _ = boot(tmp_path)
    port = fw.faces[0]
    port.fw.link = cap = Capture()
    c = connect()
    rx = handle(RX)
    c.write(rx, b"")
    c.write(rx, bytes(128))         # one byte too many
    c.write(rx, bytes(300))         # a long write: the stack keeps 128, still too long
    port.drain(0)
    assert cap.got == []
    assert port.counters["bad_empty"] == 1 and port.counters["bad_too_long"] == 2
    assert c.connected              # a few bad writes are counted, not punished


def test_misbehaving_client_is_dropped_good_one_stays(tmp_path):
    fw, _, bridge = boot(tmp_path)
    port = fw.faces[0]
    good = connect(addr=b"\x5a\x00\x00\x00\x00\x01")
    bad = connect(addr=b"\x5a\x00\x00\x00\x00\x02")
    rx = handle(RX)
    n = 0
    while bad.connected and n < 100:
        bad.write(rx, b"")
        n += 1
    assert n == ble.BAD_WRITES_MAX + 1
    assert port.counters["kicked"] == 1 and good.connected
    assert port.status()["clients"] == 1
    assert any('"ble_client_dropped"' in l for l in bridge.lines)
    good.write(rx, bytes(40))
    assert port.pending() == 1
    # bad writes spread out in time do not add up
    t = [0]
    fw.clock.now = lambda: t[0]
    for _ in range(3 * ble.BAD_WRITES_MAX):
        good.write(rx, b"")
        t[0] += ble.BAD_WINDOW_MS // ble.BAD_WRITES_MAX + 1
    assert good.connected and port.counters["kicked"] == 1


def test_full_ring_drops_and_drain_is_bounded(tmp_path):
    fw, _, _ = boot(tmp_path)
    port = fw.faces[0]
    port.fw.link = cap = Capture()
    c = connect()
    rx = handle(RX)
    for i in range(ble.RING_SLOTS + 5):
        c.write(rx, bytes([i]) * 50)
    assert port.pending() == ble.RING_SLOTS
    assert port.counters["ring_full"] == 5
    assert port.drain(0) == ble.DRAIN_MAX                      # bounded per turn
    c.write(rx, b"\xaa" * 50)                                   # room again
    while port.drain(0):
        pass
    assert cap.got == [bytes([i]) * 50 for i in range(ble.RING_SLOTS)] + [b"\xaa" * 50]
    # wrap the ring many times, with varying fill: order and contents stay right
    cap.got = []
    sent = []
    for k in range(5 * ble.RING_SLOTS):
        p = bytes([k % 251]) * (1 + k % 127)
        c.write(rx, p)
        sent.append(p)
        if k % 3 == 2:
            port.drain(0, limit=3)
    while port.drain(0):
        pass
    assert cap.got == sent and port.counters["ring_full"] == 5


def test_full_ring_never_blocks_the_radio(tmp_path):
    import asyncio
    fw, _, _ = boot(tmp_path)
    port = fw.faces[0]
    c = connect()
    rx = handle(RX)
    fw.enqueue(b"\x01" * 40)
    fw.enqueue(b"\x02" * 40)

    async def flood():
        while fw._running or port.counters["ring_full"] == 0:
            for _ in range(20):
                c.write(rx, b"\x77" * 60)
            await asyncio.sleep(0)

    async def main():
        t = asyncio.create_task(flood())
        await fw.run(1500)
        t.cancel()
    asyncio.run(main())
    assert port.counters["ring_full"] > 0
    sent = [f[:-4] for f in fw.modem.sent]       # the radio sent what was queued
    assert b"\x01" * 40 in sent and b"\x02" * 40 in sent


def test_clients_limit_and_advertising(tmp_path):
    fw, _, _ = boot(tmp_path)
    port = fw.faces[0]
    stack = bluetooth.BLE()
    cs = []
    for i in range(ble.MAX_CLIENTS):
        assert stack.adv is not None
        cs.append(connect(addr=bytes([0x5a, 0, 0, 0, 0, i])))
    assert stack.adv is None                   # full: no longer advertising
    assert bluetooth.Central().scan() is None
    stack.adv = (100000, b"", b"", True)       # a connection that raced the stop
    extra = bluetooth.Central(addr=b"\x5a\x00\x00\x00\x00\x99")
    extra.connect()
    assert not extra.connected and port.counters["refused"] == 1
    cs[0].disconnect()
    assert stack.adv is not None and port.status()["clients"] == ble.MAX_CLIENTS - 1
    assert androidapp.advertises(stack.adv[1], SERVICE)


def test_idle_client_is_disconnected(tmp_path):
    fw, _, _ = boot(tmp_path)
    port = fw.faces[0]
    t = [0]
    fw.clock.now = lambda: t[0]
    quiet = connect(addr=b"\x5a\x00\x00\x00\x00\x01")
    busy = connect(addr=b"\x5a\x00\x00\x00\x00\x02")
    rx = handle(RX)
    while t[0] <= ble.IDLE_MS + 2 * ble.STATUS_MS:
        busy.write(rx, b"\x01" * 30)           # e.g. a GOSET claim now and then
        port.drain(t[0])
        port.refresh_status(t[0])
        t[0] += ble.STATUS_MS
    assert not quiet.connected and busy.connected
    assert port.counters["idle"] == 1 and port.status()["clients"] == 1


def test_mtu_and_notifications(tmp_path):
    fw, _, _ = boot(tmp_path)
    port = fw.faces[0]
    stack = bluetooth.BLE()
    early = connect(mtu=None, addr=b"\x5a\x00\x00\x00\x00\x01")   # never exchanged: 23
    c = connect(addr=b"\x5a\x00\x00\x00\x00\x02")
    tx = handle(TX)
    pkt = bytes(range(120))
    port.send(pkt)
    assert port.send(pkt) == "duplicate"
    assert port.flush(0)
    assert c.notifications == [(tx, pkt)]
    assert early.notifications == [] and port.counters["mtu_small"] == 1
    assert c.read(tx) == pkt                   # TX holds the last packet too
    # pacing: the next one waits its 100 + rand(10) ms slot
    port.send(b"\x01" * 30)
    assert not port.flush(1)
    assert port.flush(ble.OUT_GAP_MS + ble.OUT_JITTER_MS)
    # a stack out of buffers loses the notification, counted; the next one goes out
    stack.fail_notify = 1
    port.send(b"\x02" * 30)
    port.flush(10 ** 6)
    assert port.counters["notify_failed"] == 1
    port.send(b"\x03" * 30)
    port.flush(2 * 10 ** 6)
    assert c.notifications[-1] == (tx, b"\x03" * 30)
    # the queue is bounded
    for i in range(ble.OUT_QUEUE + 3):
        port.send(bytes([i]) * 20)
    assert port.counters["queue_full"] == 3
    # nobody connected: nothing is queued, a disconnect mid-queue raises nothing
    c.disconnect()
    early.disconnect()
    for t in range(5):
        port.flush(3 * 10 ** 6 + t * 1000)
    assert port.send(b"\x09" * 20) is None and len(port.out) == 0


def test_status_characteristic(tmp_path):
    import re
    fw, _, _ = boot(tmp_path)
    port = fw.faces[0]
    stack = bluetooth.BLE()
    st = handle(ST)
    c = connect()
    assert c.read(st) == b"W:0 E:0 G:0 L:0"           # written at start
    fw.port.counters["rx"] = 5
    fw.port.counters["bad_crc"] = 2
    port.refresh_status(500)                          # not due yet
    assert c.read(st) == b"W:0 E:0 G:0 L:0"
    port.refresh_status(ble.STATUS_MS)
    assert c.read(st) == b"W:0 E:1 G:0 L:7"
    assert c.notifications[-1] == (st, b"W:0 E:1 G:0 L:7")
    n = len(c.notifications)
    port.refresh_status(2 * ble.STATUS_MS)            # unchanged: no notification
    assert len(c.notifications) == n
    assert re.match(r"^W:\d+ E:\d+ G:\d+ L:\d+$", port.status_text())
    assert fw.status()["ble"]["clients"] == 1


def test_phone_packets_reach_the_node_and_replies_go_back(tmp_path):
    fw, _, _ = boot(tmp_path)
    port = fw.faces[0]
    for content in (b"board 1", b"board 2"):
        fw.link.post(content)
    on_air = []
    enqueue = fw.enqueue
    fw.enqueue = lambda p: on_air.append(bytes(p)) or enqueue(p)
    seed = b"\x44" * 32
    phone = Node(MemStore(), identity=(seed, crypto.publickey(seed)))
    app = androidapp.App(phone)
    assert app.connect() and app.mtu == 128 and app.name == port.adv_name
    assert app.peer_key == fw.link.node.author.fid
    for t in range(0, 8000, 50):
        app.step(t)
        port.drain(t)
        port.flush(t)
        fw.on_tick(t)
    # Settle what is still in flight at the cut (jitter is random): the app takes the last
    # notification, the node takes the app's last writes (replies only queue, not notify).
    app.step(8000)
    while port.drain(8000):
        pass
    # GOSET claims crossed both ways: each knows the other's feed; the phone then asked
    # for the board's entries (WANT) and got them over BLE
    assert fw.link.node.goset.keys == phone.goset.keys and len(phone.goset) == 2
    assert phone.store.front(fw.link.node.author.fid)[0] == 2
    assert port.counters["rx"] == app.sent and app.received == port.counters["tx"] > 0
    # the answers to the phone did not go on air: only periodic packets were queued there
    assert on_air and not [p for p in on_air if len(p) == 120]


def test_config_keys_and_ble_off(tmp_path):
    assert config.check("ble", False) is False
    for bad in (1, "yes", None):
        with pytest.raises(ValueError, match="ble"):
            config.check("ble", bad)
    assert config.check("ble_name", "tinySSB-garden") == "tinySSB-garden"
    assert config.check("ble_name", None) is None
    for bad in ("", "x" * 30, "caf\u00e9", "tab\there", 7):
        with pytest.raises(ValueError, match="ble_name"):
            config.check("ble_name", bad)
    fw, problems, _ = boot(tmp_path, ble=False)
    assert fw.faces == [] and "ble" not in fw.status()
    assert fw.command(("config_set", "ble", True)) == {"ok": True, "restart": True}
    assert fw.command(("config_set", "ble_name", "n" * 29)) == {"ok": True, "restart": True}
    assert "error" in fw.command(("config_set", "ble_name", "n" * 30))
    cfg, _ = config.load(fw.root)
    assert cfg["ble"] is True and cfg["ble_name"] == "n" * 29
    fw2, _, _ = boot(tmp_path, ble=True, ble_name="tinySSB-garden")
    assert fw2.faces[0].adv_name == "tinySSB-garden"
    assert bluetooth.BLE().config("gap_name") == b"tinySSB-garden"


def test_board_without_bluetooth_runs_without_ble(tmp_path):
    import lora
    import machine
    from tssbfw import app

    class NoStack:
        UUID = bluetooth.UUID

        @staticmethod
        def BLE():
            raise OSError(19)

    root = str(tmp_path / "n")
    config.save(root, {"plan": "US915.a", "board": "heltec-v3"})
    fw, problems = app.boot(root, lora_mod=lora, machine_mod=machine, bluetooth_mod=NoStack,
                            urandom=lambda n: SEED[:n])
    assert fw.faces == [] and any(p.startswith("BLE off") for p in problems)


def _run_e2e(exe, tmp_path):
    return e2e_run.run(exe, "e2e_ble.py", tmp_path / "w")


def _check_e2e(rc, res):
    assert rc == 0, res
    assert res["a_faces"] == ["ble"] and res["b_faces"] == []
    assert res["connected"] and res["name"] == "tinySSB-e2e" and res["mtu"] == 128
    assert res["peer_key_ok"]
    assert res["a_has_phone"] and res["b_has_phone"] and res["phone_has_b"]
    assert res["disconnected_at"] is not None and res["reconnected"]
    assert res["kick"]["dropped"] and res["kick"]["writes"] == 9
    b = res["ble"]
    assert b["kicked"] == 1 and b["bad_empty"] + b["bad_too_long"] == 9
    assert b["ring_full"] >= res["flood"]["writes"] - 8
    assert b["connects"] >= 4 and b["clients"] == 1
    assert res["status_text"].startswith("W:0 E:1 G:0 L:")
    assert res["reboot_has_phone"] and res["reboot_advertising"]


@pytest.mark.skipif(not os.path.exists(MPY), reason="MicroPython unix port not installed")
def test_phone_board_board_under_micropython(tmp_path):
    _check_e2e(*_run_e2e(MPY, tmp_path))


def test_phone_board_board_under_cpython(tmp_path):
    _check_e2e(*_run_e2e(sys.executable, tmp_path))
