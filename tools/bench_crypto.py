"""Benchmark of the board crypto: pure Ed25519 / SHA-512, and the viper hot loops.

Run from the repository root under either interpreter:
    .venv/bin/micropython tools/bench_crypto.py [--pystone FILE]
    .venv/bin/python tools/bench_crypto.py [--pystone FILE]
Prints one JSON object per line: "bench", "case", figures in ms (or us) per operation, and
"ratio" against the baseline measured in the same run (pure / PyNaCl on CPython; the viper
engine / the plain Python one; the viper hot loop / its plain version). Keys and messages
are fixed, so runs compare.

--pystone FILE names a copy of the pystone 1.2 benchmark (CPython <= 3.6 shipped it as
Lib/test/pystone.py; MicroPython's tests/perf_bench/misc_pystone.py is the same program).
The case "ed25519_pystones" then gives each operation's cost in pystones: its time times
the pystone rate measured in the same process, round by round, which is how a figure from
a loaded development machine carries over to a board (an ESP32 at 240 MHz runs ~1,700
pystones a second).
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
SEED = bytes(range(32))

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


def ed25519_ops():
    """(name, fn) of the timed Ed25519 operations on a fixed key and entry."""
    from tinyssb import ed25519
    pub = ed25519.publickey(SEED)
    sig = ed25519.sign(SEED, ENTRY_MSG, pub)
    assert ed25519.verify(pub, ENTRY_MSG, sig)

    def verify_cold():
        ed25519.clear_cache()
        ed25519.verify(pub, ENTRY_MSG, sig)

    return (("verify", lambda: ed25519.verify(pub, ENTRY_MSG, sig)),
            ("verify_cold_key", verify_cold),
            ("sign", lambda: ed25519.sign(SEED, ENTRY_MSG, pub)),
            ("publickey", lambda: ed25519.publickey(SEED)))


def engines():
    from tinyssb import ed25519
    return ("viper", "plain") if getattr(ed25519, "VIPER", False) else ("plain",)


def use_engine(engine):
    """Switch tinyssb.ed25519 to an engine (a no-op for a version with only the plain one,
    so this file also measures older checkouts)."""
    from tinyssb import ed25519
    if hasattr(ed25519, "use_viper"):
        ed25519.use_viper(engine == "viper")


def bench_ed25519(n):
    """Each operation with each engine this interpreter has; returns the verify and sign
    times (ms) of the engine boards use."""
    from tinyssb import ed25519, sha512
    first = {}
    for engine in engines():
        use_engine(engine)
        k = n if engine == "viper" else max(ROUNDS, n // 4)
        for name, fn in ed25519_ops():
            ms = per_op_us(fn, k) / 1000
            extra = {}
            if name == "verify":
                extra = {"key_cached": True, "base_window": ed25519.BASE_WINDOW,
                         "key_window": ed25519.KEY_WINDOW}
            if name in first:
                extra = {"ratio": first[name] / ms, "baseline": "plain"}
            emit("ed25519_%s_pure" % name, engine=engine, ms_per_op=ms, n=k,
                 msg_bytes=len(ENTRY_MSG), **extra)
            first.setdefault(name, ms)
    use_engine("viper")
    data = ENTRY_MSG + bytes(64)
    h = per_op_us(lambda: sha512.SHA512(data).digest(), n) / 1000
    extra = {}
    if getattr(sha512, "VIPER", False):
        st, w, blk = bytearray(64), [0] * 80, data[:128]
        plain = per_op_us(lambda: sha512._compress_plain(st, blk, w), n)
        viper = per_op_us(lambda: sha512._compress(st, blk, sha512._scratch()), n)
        extra = {"block_us_viper": viper, "block_us_plain": plain, "ratio": viper / plain}
    emit("sha512_pure_184B", ms_per_op=h, n=n, hashlib_sha512=sha512.NATIVE,
         viper=getattr(sha512, "VIPER", False), **extra)
    return first["verify"], first["sign"]


def load_pystone(path):
    """The pystone program at `path` as a function loops -> pystones per second."""
    ns = {"__name__": "pystone"}
    with open(path) as f:
        exec(f.read(), ns)
    setup = ns.get("Setup")
    if setup:
        setup()
    proc0 = ns["Proc0"]

    def rate(loops):
        t0 = _now_us()
        out = proc0(loops)
        us = _since_us(t0)
        if isinstance(out, tuple):      # CPython's copy times itself (less its empty loop)
            return out[1]
        return loops * 1e6 / us
    return rate


def bench_pystones(path, rounds=60):
    """Each operation's cost in pystones: its time times the pystone rate, both measured
    in this process. Rounds alternate a short pystone run with one call of each
    operation; other processes only ever slow a run down, so the figure is the fastest
    call times the fastest pystone rate (the median of each round's ratio is given too)."""
    from tinyssb import ed25519
    rate = load_pystone(path)
    rate(500)
    ops = ed25519_ops()
    for engine in engines():
        use_engine(engine)
        k = rounds if engine == "viper" else rounds // 2
        best = {}
        ratios = {}
        top = 0
        for _ in range(k):
            ps = rate(1000)
            top = max(top, ps)
            for name, fn in ops:
                fn()
                t0 = _now_us()
                fn()
                s = _since_us(t0) / 1e6
                best[name] = min(best.get(name, s), s)
                ratios.setdefault(name, []).append(s * ps)
        for name, _ in ops:
            r = sorted(ratios[name])
            emit("ed25519_pystones", op=name, engine=engine, pystones=best[name] * top,
                 ms=best[name] * 1000, pystones_per_s=top, median_round=r[len(r) // 2],
                 rounds=k)
    use_engine("viper")


def bench_nacl(n, pure_verify_ms, pure_sign_ms):
    try:
        import nacl.bindings as sodium
    except ImportError:
        return
    from tinyssb import ed25519
    pk, sk = sodium.crypto_sign_seed_keypair(SEED)
    assert pk == ed25519.publickey(SEED)
    sm = ed25519.sign(SEED, ENTRY_MSG, pk) + ENTRY_MSG
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


def main(argv):
    pystone = None
    if len(argv) == 3 and argv[1] == "--pystone":
        pystone = argv[2]
    elif len(argv) != 1:
        print("usage: bench_crypto.py [--pystone FILE]", file=sys.stderr)
        return 2
    n = 40 if MICROPYTHON else 100
    v, s = bench_ed25519(n)
    bench_nacl(n, v, s)
    if pystone:
        bench_pystones(pystone)
    bench_hotloops(2000)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
