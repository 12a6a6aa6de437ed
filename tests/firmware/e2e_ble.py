"""A phone replicates with a board over BLE while the board replicates with a second board
over LoRa. Runs under the MicroPython unix port and under CPython (test_fw_ble.py runs both):
    micropython tests/firmware/e2e_ble.py WORKDIR
from the repository root.

Board A (Heltec V3) runs the firmware with its BLE port on the fake `bluetooth` stack;
board B (T-Beam) has BLE switched off in its config. Both run their real asyncio loops on
a clock SCALE times faster than real time, over the in-memory radio. The phone is the
Android app's BLE central (fakes/androidapp.py) with a tinyssb Node; it posts a feed with
a side chain, and so does board B. While they replicate:

- once the phone holds part of B's feed, it disconnects, stays away a while, reconnects;
- a second client writes malformed packets until the board drops it;
- a third client floods RX with a burst of writes (the ring fills and drops).

Done when A and B hold the phone's feed and the phone holds B's, side chains complete.
Then A reboots from flash and still holds the phone's feed. Prints `E2E {json}`, exits 0
when all of that held.
"""
import sys

sys.path[:0] = ["shared", "firmware", "boards", "tests/firmware/fakes"]

import asyncio
import json

import androidapp
import bluetooth
import lora
import machine
from tinyssb import crypto, entry
from tinyssb.node import Node
from tinyssb.store import MemStore
from tssbfw import app, ble, config
from tssbfw.clock import Clock

SCALE = 20            # virtual ms per real ms
STEP_MS = 2000        # virtual ms between progress checks
LIMIT_MS = 300000     # give up after this much virtual time
PHONE_MS = 100        # the phone's loop period (virtual ms)
AWAY_MS = 3000        # how long the phone stays disconnected
LONG_P = b"from the phone, long enough for a side chain. " * 5
LONG_B = b"from board b over LoRa, with its own side chain. " * 5
FLOOD = 40            # writes in the third client's burst


def _mkdir(path):
    import os
    try:
        os.mkdir(path)
    except OSError:
        pass


def have(store, fid):
    return store.front(fid)[0] if store.has_feed(fid) else 0


def complete(store, fid, seq, want):
    pkt = store.entry(fid, seq) if store.has_feed(fid) else None
    if pkt is None:
        return False
    n = store.chunk_count(fid, seq)
    if n < entry.chain_info(pkt).n_chunks:
        return False
    return entry.content(pkt, [store.chunk(fid, seq, i) for i in range(n)]) == want


def holds(store, fid, long):
    return have(store, fid) == 3 and complete(store, fid, 2, long)


def boot(work, name, seedbyte):
    return app.boot(work + "/" + name, lora_mod=lora, machine_mod=machine,
                    clock=Clock(scale=SCALE), urandom=lambda n: bytes([seedbyte]) * n)


class Phone:
    def __init__(self, fw_a):
        seed = b"\x33" * 32
        self.node = Node(MemStore(), identity=(seed, crypto.publickey(seed)))
        self.app = androidapp.App(self.node)
        self.fw = fw_a
        self.disconnected_at = None
        self.reconnected = False
        self.kick = {}
        self.flood = {}

    def misbehave(self):
        """A second client writes garbage until the board hangs up on it."""
        c = bluetooth.Central(addr=b"\x5a\x00\x00\x00\x00\x02")
        c.connect()
        c.exchange_mtu(128)
        rx = self.app.rx
        n = 0
        while c.connected and n < 50:
            c.write(rx, b"" if n % 2 else bytes(200), True)
            n += 1
        self.kick = {"writes": n, "dropped": not c.connected}

    def burst(self):
        """A third client writes FLOOD packets back to back, then leaves."""
        c = bluetooth.Central(addr=b"\x5a\x00\x00\x00\x00\x03")
        c.connect()
        c.exchange_mtu(128)
        for i in range(FLOOD):
            c.write(self.app.rx, bytes([0xf0, i]) + bytes(48), True)
        c.disconnect()
        self.flood = {"writes": FLOOD}

    async def run(self, duration_ms, b_fid):
        fw = self.fw
        end = fw.clock.now() + duration_ms
        while fw.clock.now() < end:
            now = fw.clock.now()
            st = self.node.store
            if not self.kick and now > 3000:
                self.misbehave()
            if not self.flood and now > 5000:
                self.burst()
            if self.disconnected_at is None and have(st, b_fid) >= 1 and \
                    not holds(st, b_fid, LONG_B):
                self.app.disconnect()
                self.disconnected_at = now
            elif self.disconnected_at is not None and not self.app.online and \
                    now - self.disconnected_at > AWAY_MS:
                self.reconnected = self.app.connect()
            self.app.step(now)
            await asyncio.sleep(PHONE_MS / 1000 / SCALE)


async def replicate(fa, fb, phone, p_fid, b_fid):
    t = 0
    while t < LIMIT_MS:
        await asyncio.gather(fa.run(STEP_MS), fb.run(STEP_MS), phone.run(STEP_MS, b_fid))
        t += STEP_MS
        if holds(fa.link.store, p_fid, LONG_P) and holds(fb.link.store, p_fid, LONG_P) and \
                holds(phone.node.store, b_fid, LONG_B) and phone.reconnected:
            return t
    return None


def main(work):
    _mkdir(work)
    for name, board, on in (("a", "heltec-v3", True), ("b", "tbeam", False)):
        config.save(work + "/" + name, {"plan": "US915.a", "board": board,
                                        "name": "node-" + name, "capacity": 200000,
                                        "ble": on, "ble_name": "tinySSB-e2e" if on else None})
    machine.I2C_DEVICES[0x34] = machine.I2CDevice({0x12: 0x01, 0x28: 0x00})  # T-Beam AXP192
    bluetooth.reset()
    fa, pa = boot(work, "a", 1)
    fb, pb = boot(work, "b", 2)
    port = fa.faces[0]
    phone = Phone(fa)
    p_fid = phone.node.author.fid
    b_fid = fb.link.node.author.fid
    for content in (b"phone 1", LONG_P, b"phone 3"):
        phone.node.post(content)
    for content in (b"board b 1", LONG_B, b"board b 3"):
        fb.link.post(content)
    connected = phone.app.connect()
    took = asyncio.run(replicate(fa, fb, phone, p_fid, b_fid))
    stack = bluetooth.BLE()
    pa_app = phone.app
    result = {
        "replicated_ms": took,
        "a_faces": [f.name for f in fa.faces], "b_faces": [f.name for f in fb.faces],
        "connected": connected, "name": pa_app.name, "mtu": pa_app.mtu,
        "peer_key_ok": pa_app.peer_key == fa.link.node.author.fid,
        "a_has_phone": holds(fa.link.store, p_fid, LONG_P),
        "b_has_phone": holds(fb.link.store, p_fid, LONG_P),
        "phone_has_b": holds(phone.node.store, b_fid, LONG_B),
        "disconnected_at": phone.disconnected_at, "reconnected": phone.reconnected,
        "kick": phone.kick, "flood": phone.flood,
        "ble": port.status(),
        "status_text": bytes(stack.gatts_read(port._st)).decode(),
        "phone_sent": pa_app.sent, "phone_received": pa_app.received,
        "a_radio_tx": fa.port.counters["tx"], "b_radio_rx": fb.port.counters["rx"],
        "b_sched_sent": fb.sched.counters["sent"],
        "problems_b": pb,
    }
    # Reboot A from flash (a fresh stack): the phone's feed is still there.
    bluetooth.reset()
    fa2, pa2 = boot(work, "a", 9)
    result["reboot_has_phone"] = holds(fa2.link.store, p_fid, LONG_P)
    result["reboot_advertising"] = bluetooth.BLE().adv is not None
    print("E2E " + json.dumps(result))
    ok = took is not None and result["reboot_has_phone"]
    sys.exit(0 if ok else 1)


if len(sys.argv) < 2:
    print("usage: e2e_ble.py WORKDIR")
    sys.exit(2)
main(sys.argv[1])
