"""Bridge benchmarks: link frames over a pseudo-terminal, resync after garbage, store inserts.

Prints one JSON object per line. Run: .venv/bin/python tools/bench_bridge.py
"""
import json
import os
import statistics
import tempfile
import threading
import time

from tinyssb import link
from tssb.bridge.serial_link import open_no_reset
from tssb.store import Store

FRAMES = 3000
ECHOES = 300
GARBAGE = 64 * 1024
ENTRIES = 3000


def _emit(**kw):
    print(json.dumps(kw), flush=True)


def _echo_device(master, stop):
    """Decode frames from the host and send each back (a board answering at once)."""
    dec = link.Decoder()
    os.set_blocking(master, False)
    while not stop.is_set():
        try:
            data = os.read(master, 4096)
        except BlockingIOError:
            time.sleep(0.0005)
            continue
        except OSError:
            return
        for m in dec.feed(data):
            os.write(master, link.tx(m[1]))


def bench_pty():
    master, slave = os.openpty()
    stop = threading.Event()
    t = threading.Thread(target=_echo_device, args=(master, stop), daemon=True)
    t.start()
    ser = open_no_reset(os.ttyname(slave))
    dec = link.Decoder()
    pkt = bytes(range(120))
    frame = link.tx(pkt)
    # latency: one frame out, wait for its echo
    rtts = []
    for _ in range(ECHOES):
        t0 = time.perf_counter()
        ser.write(frame)
        got = []
        while not got:
            got = dec.feed(ser.read(max(1, ser.in_waiting)))
        rtts.append((time.perf_counter() - t0) * 1000)
    _emit(bench="bridge", case="pty_latency_rtt", frames=ECHOES, frame_bytes=len(frame),
          median_ms=round(statistics.median(rtts), 3),
          p95_ms=round(sorted(rtts)[int(0.95 * len(rtts))], 3))
    # throughput: stream frames, count echoes
    t0 = time.perf_counter()
    n = 0
    sent = 0
    while n < FRAMES:
        if sent < FRAMES and sent - n < 32:
            ser.write(frame * 8)
            sent += 8
        n += len(dec.feed(ser.read(max(1, ser.in_waiting))))
    dt = time.perf_counter() - t0
    _emit(bench="bridge", case="pty_throughput_echo", frames=FRAMES,
          frames_per_s=round(FRAMES / dt), payload_kib_per_s=round(FRAMES * 120 / dt / 1024, 1))
    stop.set()
    ser.close()
    os.close(master)
    os.close(slave)


def bench_resync():
    import random
    r = random.Random(1)
    garbage = bytes(r.getrandbits(8) for _ in range(GARBAGE))
    good = link.tx(bytes(range(100)))
    base = link.Decoder()
    t0 = time.perf_counter()
    base.feed(good * 100)
    t_clean = (time.perf_counter() - t0) / 100
    d = link.Decoder()
    t0 = time.perf_counter()
    d.feed(garbage)
    got = d.feed(good)
    dt = time.perf_counter() - t0
    assert got and got[-1] == ("tx", bytes(range(100)))
    _emit(bench="bridge", case="resync_after_garbage", garbage_bytes=GARBAGE,
          resync_ms=round(dt * 1000, 3), dropped=sum(d.counters.values()),
          decode_mib_per_s=round(GARBAGE / dt / 2**20, 2),
          ratio=round(dt / (t_clean * GARBAGE / len(good)), 2))


def bench_store():
    with tempfile.TemporaryDirectory() as tmp:
        out = {}
        for mode in ("per_entry_commit", "batched_100"):
            s = Store(os.path.join(tmp, mode + ".db"))
            fid = bytes(32)
            s.add_feed(fid)
            n = ENTRIES if mode != "per_entry_commit" else ENTRIES // 10
            t0 = time.perf_counter()
            seq = 0
            while seq < n:
                if mode == "batched_100":
                    with s.transaction():
                        for _ in range(100):
                            seq += 1
                            s.append(fid, seq, bytes(120), bytes(20))
                else:
                    seq += 1
                    s.append(fid, seq, bytes(120), bytes(20))
            dt = time.perf_counter() - t0
            s.close()
            out[mode] = n / dt
        _emit(bench="bridge", case="store_insert", per_entry_commit_per_s=round(out["per_entry_commit"]),
              batched_100_per_s=round(out["batched_100"]),
              ratio=round(out["batched_100"] / out["per_entry_commit"], 2))


def main():
    bench_pty()
    bench_resync()
    bench_store()


if __name__ == "__main__":
    main()
