"""Benchmark of the board crypto: pure Ed25519 / SHA-512, and the viper hot loops.

Run from the repository root under either interpreter:
    .venv/bin/micropython tools/bench_crypto.py
    .venv/bin/python tools/bench_crypto.py
Prints one JSON object per line: "bench", "case", figures in ms (or us) per operation, and
"ratio" against the baseline measured in the same run (pure / PyNaCl on CPython; the viper
hot loop / its plain Python version). Keys and messages are fixed, so runs compare.
"""
import sys

sys.path.insert(0, "shared")

try:
    import ujson as json
except ImportError:
    import json

import time

MICROPYTHON = sys.implementation.name == "micropython"
# A tinySSB log entry is 120 bytes; its signed part is the 64-byte name + 56 bytes.
ENTRY_MSG = bytes(range(120))

if MICROPYTHON:
    def _now_us():
        return time.ticks_us()

    def _since_us(t0):
        return time.ticks_diff(time.ticks_us(), t0)
else:
    def _now_us():
        return time.perf_counter()

    def _since_us(t0):
        return (time.perf_counter() - t0) * 1e6


ROUNDS = 5


def per_op_us(fn, n):
    """Microseconds per fn() call: the best of ROUNDS rounds of n // ROUNDS calls each.

    The best round, not the mean, since other processes share the cores; one warm-up call
    first (imports, caches).
    """
    fn()
    k = max(1, n // ROUNDS)
    best = None
    for _ in range(ROUNDS):
        t0 = _now_us()
        for _ in range(k):
            fn()
        us = _since_us(t0) / k
        if best is None or us < best:
            best = us
    return best


def emit(case, **fields):
    rec = {"bench": "crypto", "case": case,
           "interpreter": sys.implementation.name}
    for k in fields:
        v = fields[k]
        rec[k] = round(v, 4) if isinstance(v, float) else v
    print(json.dumps(rec))


def bench_ed25519(n):
    from tinyssb import ed25519, sha512
    seed = bytes(range(32))
    pub = ed25519.publickey(seed)
    sig = ed25519.sign(seed, ENTRY_MSG, pub)
    assert ed25519.verify(pub, ENTRY_MSG, sig)

    def verify_cold():
        ed25519.clear_cache()
        ed25519.verify(pub, ENTRY_MSG, sig)

    v = per_op_us(lambda: ed25519.verify(pub, ENTRY_MSG, sig), n) / 1000
    vc = per_op_us(verify_cold, n) / 1000
    s = per_op_us(lambda: ed25519.sign(seed, ENTRY_MSG, pub), n) / 1000
    kp = per_op_us(lambda: ed25519.publickey(seed), n) / 1000
    h = per_op_us(lambda: sha512.SHA512(ENTRY_MSG + bytes(64)).digest(), n) / 1000
    emit("ed25519_verify_pure", ms_per_op=v, n=n, msg_bytes=len(ENTRY_MSG),
         key_cached=True, base_window=ed25519.BASE_WINDOW, key_window=ed25519.KEY_WINDOW)
    emit("ed25519_verify_pure_cold_key", ms_per_op=vc, n=n, msg_bytes=len(ENTRY_MSG),
         ratio=vc / v, baseline="ed25519_verify_pure")
    emit("ed25519_sign_pure", ms_per_op=s, n=n, msg_bytes=len(ENTRY_MSG))
    emit("ed25519_publickey_pure", ms_per_op=kp, n=n)
    emit("sha512_pure_184B", ms_per_op=h, n=n, hashlib_sha512=sha512.NATIVE)
    return v, s, pub, sig


def bench_nacl(n, pure_verify_ms, pure_sign_ms, pub, sig):
    try:
        import nacl.bindings as sodium
    except ImportError:
        return
    seed = bytes(range(32))
    pk, sk = sodium.crypto_sign_seed_keypair(seed)
    assert pk == pub
    sm = sig + ENTRY_MSG
    v = per_op_us(lambda: sodium.crypto_sign_open(sm, pk), n * 20) / 1000
    s = per_op_us(lambda: sodium.crypto_sign(ENTRY_MSG, sk), n * 20) / 1000
    emit("ed25519_verify_nacl", ms_per_op=v, n=n * 20)
    emit("ed25519_verify_pure_vs_nacl", ratio=pure_verify_ms / v,
         pure_ms=pure_verify_ms, nacl_ms=v)
    emit("ed25519_sign_pure_vs_nacl", ratio=pure_sign_ms / s,
         pure_ms=pure_sign_ms, nacl_ms=s)


def bench_hotloops(n):
    from tinyssb import hotloops as hl
    impl = "viper" if hl.VIPER else "cpython"
    acc = bytearray(32)
    key = bytes(range(32, 64))
    fast = per_op_us(lambda: hl.xor_into(acc, key), n)
    plain = per_op_us(lambda: hl.xor_into_plain(acc, key), n)
    emit("xor_into_32B", us_per_op=fast, plain_us_per_op=plain, ratio=fast / plain,
         baseline="xor_into_plain", impl=impl, n=n)
    frame = bytes(range(124))
    assert hl.crc32(frame) == hl.crc32_plain(frame)
    fast = per_op_us(lambda: hl.crc32(frame), n)
    plain = per_op_us(lambda: hl.crc32_plain(frame), n)
    emit("crc32_124B", us_per_op=fast, plain_us_per_op=plain, ratio=fast / plain,
         baseline="crc32_plain", impl=impl, n=n)


def main():
    n = 40 if MICROPYTHON else 100
    v, s, pub, sig = bench_ed25519(n)
    bench_nacl(n, v, s, pub, sig)
    bench_hotloops(2000)


if __name__ == "__main__":
    main()
