# Coded-symbol benchmark (shared/tinyssb/codedsym.py), for MicroPython and CPython alike:
#   micropython tools/bench_codedsym.py      (make bench runs it on the unix port)
# One JSON object per line: decoding LoRa-sized packets of GOSET-shaped symbols (32-byte keys,
# 3 symbols per packet, a 100-feed set with 12 differences) against a baseline in the same
# run (the decoder's own subtraction alone, no peeling), and the encoder's upkeep per key.
import json
import sys
import time

sys.path.insert(0, "shared")
sys.path.insert(0, "tests/core")

from tinyssb import codedsym as CS  # noqa: E402
from support import Rand  # noqa: E402

PER_PACKET = 3          # 3 x 37-byte symbols fit a 120-byte LoRa payload


def us():
    return time.ticks_us() if hasattr(time, "ticks_us") else int(time.perf_counter() * 1e6)


def sets(cd, common, diff, m):
    r = Rand(3)
    shared = [r.bytes(cd.key_len) for _ in range(common)]
    A, B = CS.Encoder(cd, 0), CS.Encoder(cd, 0)
    for k in shared:
        A.add(k)
        B.add(k)
    for i in range(diff):
        (A if i % 2 else B).add(r.bytes(cd.key_len))
    A.extend(m)
    B.extend(m)
    return A, B


def run(cd, A, B, same):
    dec = CS.Decoder(cd, B if not same else A, 400, 200)
    t0 = us()
    i = packets = 0
    while not dec.done and i + PER_PACKET <= A.m:
        dec.add(i, A.encode(i, i + PER_PACKET))
        i += PER_PACKET
        packets += 1
        if same:
            break
    return (us() - t0) / packets, i, dec


def main():
    cd = CS.Codec(32, 4, 1)
    A, B = sets(cd, 100, 12, 120)
    base, _, _ = run(cd, A, B, True)
    t, symbols, dec = run(cd, A, B, False)
    print(json.dumps({"bench": "codedsym", "case": "decode goset packet", "us_per_packet": int(t),
                      "symbols": symbols, "keys": len(dec.remote_keys) + len(dec.local_keys),
                      "baseline_us_per_packet": int(base), "ratio": round(t / max(base, 1), 2)}))
    e = CS.Encoder(cd, 64)
    r = Rand(4)
    keys = [r.bytes(32) for _ in range(100)]
    t0 = us()
    for k in keys:
        e.add(k)
    print(json.dumps({"bench": "codedsym", "case": "encoder add m=64",
                      "us_per_key": int((us() - t0) / len(keys))}))


main()
