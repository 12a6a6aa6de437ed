"""Firmware figures: heap of a node with 100 feeds under the MicroPython unix port,
per-packet processing time, .mpy bundle size, flash bytes written per accepted entry, and
the BLE port's extra heap with a connected client, time per BLE write and .mpy size.

Usage: python tools/bench_firmware.py          (CPython; runs the MicroPython half itself)
Prints one JSON object per line: {"bench": "firmware", "case", "impl", figures...,
"ratio"}. Ratios compare against a baseline measured in the same run: the flash store
against the in-memory store (heap, time per packet), .mpy against source bytes, flash
bytes against the 120-byte packet; the BLE port against the LoRa port (RadioPort, limiter
and scheduler: heap with a full queue, frame check per frame), ble.mpy against the bundle.
The BLE figures run on the fake `bluetooth` stack of the tests (tests/firmware/fakes),
whose own objects are counted as the port's (an over-estimate).

The same measuring code runs on both interpreters (`measure`); CPython spawns
`micropython tools/bench_firmware.py --child WORKDIR` for the unix-port figures.
"""
import gc
import json
import os
import sys
import time

N_FEEDS = 100          # deployed GOSET capacity
ENTRIES_PER_FEED = 3   # synthetic entries per feed for the heap figure
N_RX = 30              # signed entries received for the time per packet
LONG = b"x" * 228      # content with a side chain of 2 chunks
BLE_WRITES = 300       # writes timed for the BLE figure


def _now_us():
    if hasattr(time, "ticks_us"):
        return time.ticks_us()
    return time.perf_counter_ns() // 1000


def _elapsed_us(t0):
    if hasattr(time, "ticks_diff"):
        return time.ticks_diff(time.ticks_us(), t0)
    return _now_us() - t0


def _impl():
    return sys.implementation.name


def _emit(case, **fields):
    rec = {"bench": "firmware", "case": case, "impl": _impl()}
    rec.update(fields)
    print(json.dumps(rec))


def _rmtree(path):
    try:
        entries = list(os.ilistdir(path)) if hasattr(os, "ilistdir") else \
            [(n, 0x4000 if os.path.isdir(path + "/" + n) else 0x8000) for n in os.listdir(path)]
    except OSError:
        return
    for e in entries:
        p = path + "/" + e[0]
        if e[1] == 0x4000:
            _rmtree(p)
        else:
            os.remove(p)
    os.rmdir(path)


def _fid(i):
    return bytes([i & 0xFF, i >> 8]) * 16


def _fill(store):
    for i in range(N_FEEDS):
        fid = _fid(i + 1)
        store.add_feed(fid)
        for q in range(1, ENTRIES_PER_FEED + 1):
            store.append(fid, q, bytes([q]) * 120, bytes([q]) * 20)


def heap_of(make_store, reopen):
    """Bytes of heap held by a Node (and its store) following N_FEEDS feeds of
    ENTRIES_PER_FEED entries; with `reopen` the store is filled first and measured as
    opened at boot (flash), else it is built and filled inside the measurement (RAM)."""
    from tinyssb.node import Node
    if reopen:
        _fill(make_store())
    gc.collect()
    before = gc.mem_alloc()
    store = make_store()
    if not reopen:
        _fill(store)
    gc.collect()
    store_only = gc.mem_alloc() - before
    node = Node(store, verify=lambda p, m, s: True)
    gc.collect()
    return gc.mem_alloc() - before, store_only, len(node.replicas)


def rx_time(make_store, work, packets, fid):
    """Mean µs per received packet for a node over `make_store` and its bytes written."""
    from tinyssb.node import Node
    store = make_store(work)
    store.add_feed(fid)
    node = Node(store)
    node.follow(fid)
    t0 = _now_us()
    for p in packets:
        node.on_packet(p, 0)
    us = _elapsed_us(t0)
    return us / len(packets), store.front(fid)[0], getattr(store, "bytes_written", None)


class _Sink:
    """Node link stand-in: takes the packets, answers nothing (the port's cost alone)."""

    def __init__(self):
        self.n = 0

    def on_packet(self, pkt, now):
        self.n += 1
        return ()


def _heap():
    gc.collect()
    return gc.mem_alloc()


def ble_figures(top):
    """BLE port on the fake stack: extra heap with one connected client (ring and
    notification queue full), and the time per write, each next to the LoRa port."""
    sys.path.append(top + "/tests/firmware/fakes")
    import bluetooth
    from tinyssb.frames import add_crc
    from tinyssb.store import MemStore
    from tssbfw import ble, corelink, regions
    from tssbfw.app import Firmware
    from tssbfw.airtime import plan_airtime_ms
    from tssbfw.clock import Clock
    from tssbfw.limiter import TxLimiter
    from tssbfw.radio import RadioPort
    from tssbfw.scheduler import Scheduler

    plan = regions.plan("US915.a")
    fw = Firmware(plan, corelink.NodeLink(MemStore()), None, Clock())
    pub = bytes(range(32))
    bluetooth.reset()
    bluetooth.BLE()
    client = bluetooth.Central()
    if hasattr(gc, "mem_alloc"):
        before = _heap()
        port = ble.BlePort(fw, pub, None, bluetooth)
        client.connect()
        client.exchange_mtu(ble.MTU)
        rx = [h for h in bluetooth.BLE().attrs
              if bluetooth.BLE().attrs[h].uuid == bluetooth.UUID(ble.RX_UUID)][0]
        for i in range(ble.RING_SLOTS):
            client.write(rx, bytes([i]) * 120)
        for i in range(ble.OUT_QUEUE):
            port.send(bytes([i]) * 120)
        ble_bytes = _heap() - before
        before = _heap()
        rport = RadioPort(plan)
        sched = Scheduler(lambda n: plan_airtime_ms(plan, n), TxLimiter(plan["limits"]),
                          lambda n: 0)
        for i in range(10):
            sched.push(add_crc(bytes([i]) * 120))
        radio_bytes = _heap() - before
        _emit("ble_heap", clients=len(port.clients), ring=port.pending(),
              queue=len(port.out), ble_bytes=ble_bytes, lora_port_bytes=radio_bytes,
              ratio=round(ble_bytes / radio_bytes, 3))
        del port, rport, sched
        client.disconnect()
    bluetooth.reset()
    stack = bluetooth.BLE()
    client = bluetooth.Central()
    port = ble.BlePort(fw, pub, None, bluetooth)
    conn = client.connect()
    client.exchange_mtu(ble.MTU)
    sink = _Sink()
    fw.link = sink
    rx = port._rx
    pkt = bytes(range(120))
    t0 = _now_us()
    for _ in range(BLE_WRITES):           # the stack stored the value; the IRQ and the task
        stack.attrs[rx].value = pkt
        port._irq(ble.IRQ_GATTS_WRITE, (conn, rx))
        port.drain(0)
    port_us = _elapsed_us(t0) / BLE_WRITES
    t0 = _now_us()
    for _ in range(BLE_WRITES):           # the same through the fake client's write
        client.write(rx, pkt)
        port.drain(0)
    fake_us = _elapsed_us(t0) / BLE_WRITES
    rport = RadioPort(plan)
    frame = add_crc(pkt)
    t0 = _now_us()
    for _ in range(BLE_WRITES):
        rport.accept(frame)
    lora_us = _elapsed_us(t0) / BLE_WRITES
    _emit("ble_write_us", writes=BLE_WRITES, length=len(pkt), port_us=round(port_us, 1),
          with_fake_stack_us=round(fake_us, 1), lora_frame_check_us=round(lora_us, 1),
          ratio=round(port_us / lora_us, 3))
    bluetooth.reset()


def measure(work, top="."):
    sys.path[:0] = [top + "/shared", top + "/firmware", top + "/boards"]
    from tinyssb import crypto
    from tinyssb.frames import add_crc
    from tinyssb.node import Node
    from tinyssb.store import MemStore
    from tssbfw.flashstore import FlashStore
    from tssbfw.radio import RadioPort
    from tssbfw import regions

    def flash(sub):
        def make(w):
            return FlashStore(w + "/" + sub, capacity=1 << 26)
        return make

    # heap: 100 feeds (gc.mem_alloc exists on MicroPython only)
    if hasattr(gc, "mem_alloc"):
        mem_heap, mem_store, n = heap_of(MemStore, False)
        fl_heap, fl_store, n2 = heap_of(lambda: FlashStore(work + "/heap", capacity=1 << 26),
                                        True)
        _emit("heap_100_feeds", feeds=n2, entries_per_feed=ENTRIES_PER_FEED,
              flash_store_bytes=fl_heap, mem_store_bytes=mem_heap,
              flash_store_only=fl_store, mem_store_only=mem_store,
              ratio=round(fl_heap / mem_heap, 3))
    # signed traffic from an author node
    seed = b"\x11" * 32
    a = Node(MemStore(), identity=(seed, crypto.publickey(seed)))
    fid = a.author.fid
    for i in range(N_RX):
        a.post(LONG if i % 3 == 0 else b"entry %d" % i)
    packets = []
    for q in range(1, N_RX + 1):
        packets.append(a.store.entry(fid, q))
        for c in range(a.store.chunk_count(fid, q)):
            packets.append(a.store.chunk(fid, q, c))
    mem_us, got_m, _ = rx_time(lambda w: MemStore(), work, packets, fid)
    fl_us, got_f, written = rx_time(flash("rx"), work, packets, fid)
    _emit("rx_packet_us", packets=len(packets), entries=got_f,
          flash_store_us=round(fl_us, 1), mem_store_us=round(mem_us, 1),
          ratio=round(fl_us / mem_us, 3))
    n_chunks = len(packets) - N_RX
    per_entry = written / got_f
    _emit("flash_bytes_per_entry", entries=got_f, chunks=n_chunks,
          bytes_written=written, bytes_per_entry=round(per_entry, 1),
          plain_entry_bytes=148, chunk_bytes=132, ratio=round(per_entry / (len(packets)
                                                                          * 120 / got_f), 3))
    # frame checks on receive: good frame vs corrupted frame
    port = RadioPort(regions.plan("US915.a"))
    good = add_crc(packets[0])
    bad = bytearray(good)
    bad[5] ^= 1
    bad = bytes(bad)
    reps = 300
    t0 = _now_us()
    for _ in range(reps):
        port.accept(good)
    good_us = _elapsed_us(t0) / reps
    t0 = _now_us()
    for _ in range(reps):
        port.accept(bad)
    bad_us = _elapsed_us(t0) / reps
    _emit("frame_check_us", good_us=round(good_us, 1), bad_crc_us=round(bad_us, 1),
          ratio=round(bad_us / good_us, 3))
    # a GOSET claim from a peer with a different set
    b = Node(MemStore())
    for i in range(20):
        b.follow(_fid(i + 500))
    claim = b.goset.full_claim()
    c = Node(MemStore())
    t0 = _now_us()
    for _ in range(50):
        c.on_packet(claim, 0)
    _emit("rx_goset_claim_us", us=round(_elapsed_us(t0) / 50, 1))
    ble_figures(top)


def main():
    import subprocess
    import tempfile
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:0] = [top + "/host"]
    from tssb.flash import bundle
    with tempfile.TemporaryDirectory() as work:
        info = bundle.build(work + "/mpy")
        _emit("mpy_bundle", arch=bundle.ARCH, modules=len(info["files"]) - 2,
              mpy_bytes=info["mpy_bytes"], py_bytes=info["py_bytes"],
              ratio=round(info["mpy_bytes"] / info["py_bytes"], 3))
        ble_mpy = dict(info["files"])[os.path.join("tssbfw", "ble.mpy")]
        _emit("ble_mpy", arch=bundle.ARCH, ble_mpy_bytes=ble_mpy,
              bundle_mpy_bytes=info["mpy_bytes"], ratio=round(ble_mpy / info["mpy_bytes"], 3))
        mpy = os.path.join(os.path.dirname(sys.executable), "micropython")
        if os.path.exists(mpy):
            os.mkdir(work + "/m")
            r = subprocess.run([mpy, os.path.abspath(__file__), "--child", work + "/m"],
                               cwd=top, capture_output=True, text=True, timeout=300)
            sys.stdout.write(r.stdout)
            if r.returncode:
                sys.stderr.write(r.stderr)
        os.mkdir(work + "/c")
        measure(work + "/c", top)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        measure(sys.argv[2])
    else:
        main()
