"""Two firmware instances replicate a feed end to end over the fake radio.

Runs under the MicroPython unix port and under CPython (test_fw_app.py launches both):
    micropython tests/firmware/e2e_two_nodes.py WORKDIR [BUNDLE_DIR]
from the repository root; with BUNDLE_DIR the core, firmware and boards are imported from
a compiled .mpy bundle (tools/build_mpy.py --arch x64) instead of the sources.

Node A (Heltec V3, SX1262) posts three entries, one with a side chain; node B (T-Beam, SX1276, AXP192 power rail) boots from flash with its own
identity; both run their real asyncio loops on a clock scaled SCALE times faster than
real time. Every 7th delivery is corrupted in flight. Prints one line `E2E {json}` and
exits 0 when B holds A's feed completely, also after a reboot from flash.
"""
import sys

if len(sys.argv) > 2:
    sys.path[:0] = [sys.argv[2], "tests/firmware/fakes"]
else:
    sys.path[:0] = ["shared", "firmware", "boards", "tests/firmware/fakes"]

import asyncio
import json

import fakeradio
import lora
import machine
from tinyssb import entry
from tssbfw import app, config
from tssbfw.bridge import MemoryBridge
from tssbfw.clock import Clock

SCALE = 20            # virtual ms per real ms
STEP_MS = 5000        # virtual ms between progress checks
LIMIT_MS = 240000     # give up after this much virtual time
LONG = b"side chain content " * 12  # 228 bytes: needs chunks


def _mkdir(path):
    import os
    try:
        os.mkdir(path)
    except OSError:
        pass


def setup(work):
    _mkdir(work)
    machine.I2C_DEVICES[0x34] = machine.I2CDevice({0x12: 0x01, 0x28: 0x00})
    corrupted = [0]

    def corrupt(src, dst, data):
        corrupted[0] += 1
        if corrupted[0] % 7 == 0:
            b = bytearray(data)
            b[len(b) // 2] ^= 0x40
            return bytes(b)
        return data
    fakeradio.ETHER.corrupt = corrupt
    for name, board, seedbyte in (("a", "heltec-v3", 1), ("b", "tbeam", 2)):
        root = work + "/" + name
        config.save(root, {"plan": "US915.a", "board": board, "name": "node-" + name,
                           "capacity": 200000, "tick_ms": 100})
    return corrupted


def start(work, name, seedbyte, bridge=None):
    fw, problems = app.boot(work + "/" + name, lora_mod=lora, machine_mod=machine,
                            clock=Clock(scale=SCALE), bridge=bridge,
                            urandom=lambda n: bytes([seedbyte]) * n)
    return fw, problems


def have(fw, fid):
    st = fw.link.store
    return st.front(fid)[0] if st.has_feed(fid) else 0


def chain_complete(fw, fid, seq):
    st = fw.link.store
    pkt = st.entry(fid, seq)
    if pkt is None:
        return None
    info = entry.chain_info(pkt)
    n = st.chunk_count(fid, seq)
    if n < info.n_chunks:
        return None
    return entry.content(pkt, [st.chunk(fid, seq, i) for i in range(n)])


async def replicate(fa, fb, fid):
    t = 0
    while t < LIMIT_MS:
        await asyncio.gather(fa.run(STEP_MS), fb.run(STEP_MS))
        t += STEP_MS
        if have(fb, fid) == 3 and chain_complete(fb, fid, 2) == LONG:
            return t
    return None


def main(work):
    corrupted = setup(work)
    bridge_b = MemoryBridge()
    fa, pa = start(work, "a", 1)
    fb, pb = start(work, "b", 2, bridge_b)
    fid = fa.link.node.author.fid
    for content in (b"hello 1", LONG, b"bye"):
        fa.link.post(content)
    took = asyncio.run(replicate(fa, fb, fid))
    axp = machine.I2C_DEVICES[0x34].regs
    result = {
        "replicated_ms": took,
        "b_has": have(fb, fid),
        "chain_ok": chain_complete(fb, fid, 2) == LONG,
        "b_bad_crc": fb.port.counters.get("bad_crc", 0) + fa.port.counters.get("bad_crc", 0),
        "corrupted": corrupted[0] // 7,
        "a_tx": fa.port.counters["tx"], "b_tx": fb.port.counters["tx"],
        "b_bridge_rx": len(bridge_b.rx),
        "b_events": len(bridge_b.lines),
        "b_append_events": len([l for l in bridge_b.lines if '"append"' in l]),
        "axp_ldo2_on": bool(axp.get(0x12, 0) & 0x04), "axp_ldo2_code": axp.get(0x28, 0) >> 4,
        "created": ["created identity" in pa, "created identity" in pb],
        "modem_a": [type(fa.modem).__name__, fa.modem.cfg["syncword"], fa.modem.cfg["freq_khz"],
                    fa.modem.tcxo_mv],
        "modem_b": [type(fb.modem).__name__, fb.modem.pins["dio0"], fb.modem.cfg["crc_en"]],
    }
    # Reboot B from flash: same identity, same feed contents.
    pub_b = fb.link.node.author.fid
    fb2, pb2 = start(work, "b", 9)
    result["reboot_has"] = have(fb2, fid)
    result["reboot_chain_ok"] = chain_complete(fb2, fid, 2) == LONG
    result["reboot_same_id"] = fb2.link.node.author.fid == pub_b
    result["reboot_created"] = "created identity" in pb2
    print("E2E " + json.dumps(result))
    ok = (took is not None and result["chain_ok"] and result["reboot_has"] == 3
          and result["reboot_same_id"])
    sys.exit(0 if ok else 1)


if len(sys.argv) < 2:
    print("usage: e2e_two_nodes.py WORKDIR [BUNDLE_DIR]")
    sys.exit(2)
main(sys.argv[1])
