"""SETU benchmark: wall time, bytes each way, round trips and decode failures for set sizes
10^4..10^6 and 10..10^4 differences, next to the information-theoretic lower bound and a
naive baseline (send all 8-byte IDs). One JSON object per line.

The common part of both sets is built once per size with its incremental state (keys,
strata estimators, tssb2 base IBF) and copied; the differing elements are then added
incrementally, as a store does when entries arrive. Only the sync itself is timed.

Usage: python tools/bench_setu.py [--sizes 10000,100000] [--diffs 10,100,1000,10000]
"""
import argparse
import json
import math
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "host"))

from tssb.setu import constants as C  # noqa: E402
from tssb.setu.machine import Config, Reconciler  # noqa: E402
from tssb.setu.setstate import ElementSet  # noqa: E402

ELEMENT_SIZE = 32           # as in GNUnet's profiler runs (-w 32), reference 1.5
ELEMENT_TYPES = (C.MSG_ELEMENTS, C.MSG_FULL_ELEMENT)


def lower_bound_bytes(d, bits=64):
    """log2 C(2^bits, d) / 8: bytes needed to name d of the 2^bits IDs (reference 6)."""
    if d == 0:
        return 0.0
    n = 2.0 ** bits
    lg = (math.lgamma(n + 1) - math.lgamma(d + 1) - math.lgamma(n - d + 1)) if bits < 53 else \
        sum(math.log(n - i) for i in range(d)) - math.lgamma(d + 1)
    return lg / math.log(2) / 8


def run_pair(a, b):
    """Deliver messages in order per direction; track causal depth for round trips."""
    stats = {"ab": [0, 0], "ba": [0, 0]}   # bytes, element-message bytes
    to_a, to_b = [], []
    maxdepth = 0

    def emit(lst, direction, msgs, depth):
        nonlocal maxdepth
        for m in msgs:
            s = stats[direction]
            s[0] += len(m)
            if int.from_bytes(m[2:4], "big") in ELEMENT_TYPES:
                s[1] += len(m)
            lst.append((m, depth))
            maxdepth = max(maxdepth, depth)

    emit(to_b, "ab", a.start(), 1)
    ia = ib = 0
    while ia < len(to_a) or ib < len(to_b):
        if ib < len(to_b):
            m, dep = to_b[ib]
            ib += 1
            emit(to_a, "ba", b.receive(m), dep + 1)
        if ia < len(to_a):
            m, dep = to_a[ia]
            ia += 1
            emit(to_b, "ab", a.receive(m), dep + 1)
    return stats, maxdepth


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="10000,100000",
                   help="set sizes (10^6 works but builds its state for several minutes)")
    p.add_argument("--diffs", default="10,100,1000,10000")
    p.add_argument("--gnunet-max", type=int, default=100000,
                   help="largest set size also run with the GNUnet profile (its IBFs are "
                        "rebuilt per size, O(n) in Python)")
    args = p.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    diffs = [int(x) for x in args.diffs.split(",")]
    rnd = random.Random(1)
    for n in sizes:
        t0 = time.perf_counter()
        common = ElementSet()
        for _ in range(n):
            common.add(rnd.randbytes(ELEMENT_SIZE))
        from tssb.setu.profiles import GnunetProfile, Tssb2Profile
        from tssb.setu.strata import se_count_for
        nse = se_count_for(ELEMENT_SIZE, n)
        profiles = [Tssb2Profile] + ([GnunetProfile] if n <= args.gnunet_max else [])
        for prof in profiles:
            common.strata(prof, nse)
        common.ibf(Tssb2Profile, 48, 0)  # builds the tssb2 base IBF
        build = time.perf_counter() - t0
        print(json.dumps({"bench": "setu", "case": "state_build", "n": n, "strata": nse,
                          "profiles": [q.name for q in profiles], "seconds": round(build, 2),
                          "us_per_element": round(build / n * 1e6, 2)}), flush=True)
        for d in diffs:
            extra = [rnd.randbytes(ELEMENT_SIZE) for _ in range(d)]
            for prof in profiles:
                A, B = common.copy(), common.copy()
                for i, e in enumerate(extra):   # two-sided: half new on each side
                    (A if i % 2 else B).add(e)
                a = Reconciler(A, True, Config(profile_id=prof.pid))
                b = Reconciler(B, False, Config())
                t1 = time.perf_counter()
                st, depth = run_pair(a, b)
                wall = time.perf_counter() - t1
                assert A.checksum == B.checksum and len(A) == n + d
                recon = st["ab"][0] + st["ba"][0] - st["ab"][1] - st["ba"][1]
                lb = lower_bound_bytes(d)
                naive = 8 * (n + d // 2) + 8 * d  # all IDs one way, the missing IDs back
                print(json.dumps({
                    "bench": "setu", "case": "%s n=%d d=%d" % (prof.name, n, d),
                    "profile": prof.name, "n": n, "d": d, "mode": a.stats["mode"],
                    "wall_s": round(wall, 3),
                    "bytes_i_to_r": st["ab"][0], "bytes_r_to_i": st["ba"][0],
                    "recon_bytes": recon, "round_trips": (depth + 1) // 2,
                    "ibf_rounds": a.stats["rounds"] + b.stats["rounds"],
                    "decode_failures": a.stats["decode_failures"] + b.stats["decode_failures"],
                    "lower_bound_bytes": round(lb, 1), "naive_bytes": naive,
                    "recon_bytes_per_diff": round(recon / d, 1),
                    "ratio": round(recon / lb, 2), "ratio_naive": round(naive / lb, 2),
                }), flush=True)


if __name__ == "__main__":
    main()
