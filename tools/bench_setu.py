"""SETU benchmark: bytes both ways, round trips, state build and sync time per profile for set
sizes 10^4..10^6 and 1..10^4 differences, next to the information-theoretic lower bound and a
naive baseline (send all 8-byte IDs). One JSON object per line.

The common part of both sets is built once per size (elements hashed once, `state_s` = that
plus building the profile's state: rateless prefix, or tssb2/GNUnet keys, estimators and base
IBF) and copied; the differing elements (half on each side) are then added incrementally, as a
store does when entries arrive, and the state brought up to date before the clock starts.
Only the sync itself is timed (`sync_s`). `bytes_total` is every byte both ways, elements
included; `ratio_32d` = bytes_total / (32 d). An `upkeep` line per size gives the amortised
cost of appending elements to a set with the rateless state (hash, key index, prefix batch).

`--stream-per-diff X` makes the responder stream X symbols per true difference (first flight
included) instead of sizing the stream from its estimate: the window of X that passes (2 round
trips, ratio_32d <= 2.0) is what rateless.stream_factor aims for. `--stream-factor F` replaces
that rule by a constant factor (the sets depend only on --seed, so factors compare on the same
sets). `--estimates N` only simulates the responder's estimate of d (N random differences per
d: the first flight's exact comparisons and probes, from the difference's own symbols) and
prints its spread and how often a stream of each factor lands in that window (docs/setu.md,
"What holds now"). `--first-at initiator` puts the first differing element (the only one at
d = 1) at the initiator.

`--spread uniform` places the differing elements at random positions of the key order the
rateless state keeps (as if they had been inserted at random times before the state was
built) instead of last, so that no search can profit from newest-first order.

Usage: python tools/bench_setu.py [--profile rateless] [--sizes 10000,100000,1000000]
       [--diffs 1,10,100,1000] [--gnunet-max 100000] [--tssb2-max 1000000] [--seed 1]
       [--spread last|uniform] [--first-at responder|initiator] [--stream-per-diff X]
       [--stream-factor F] [--estimates N]
The profile named by --profile runs first; the tssb2 and gnunet rows follow for comparison.
"""
import argparse
import json
import math
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "host"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "shared"))

from tssb.setu import constants as C  # noqa: E402
from tssb.setu import rateless as RL  # noqa: E402
from tssb.setu.machine import Config, Reconciler  # noqa: E402
from tssb.setu.profiles import GnunetProfile, Tssb2Profile  # noqa: E402
from tssb.setu.setstate import ElementSet  # noqa: E402
from tssb.setu.strata import se_count_for  # noqa: E402

ELEMENT_SIZE = 32           # as in GNUnet's profiler runs (-w 32), reference 1.5
ELEMENT_TYPES = (C.MSG_ELEMENTS, C.MSG_FULL_ELEMENT)
UPKEEP_APPENDS = 10000      # elements appended for the upkeep figure
PROFILE_IDS = {"rateless": C.PROFILE_RATELESS, "tssb2": C.PROFILE_TSSB2,
               "gnunet": C.PROFILE_GNUNET}


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


def build_state(eset, name, n):
    """Build (or bring up to date) the incremental state a profile syncs from."""
    if name == "rateless":
        eset.rateless(RL.prefix_length(len(eset)))
        return
    prof = Tssb2Profile if name == "tssb2" else GnunetProfile
    eset.strata(prof, se_count_for(ELEMENT_SIZE, n))
    if name == "tssb2":
        eset.ibf(Tssb2Profile, 48, 0)   # builds the tssb2 base IBF


def spread_uniform(eset, k, rnd):
    """Move the last k keys of the rateless state's key order to random positions."""
    import numpy as np
    rl = eset._rl
    rl.flush()
    n = len(rl._items)
    if not k or k >= n:
        return
    head, tail = slice(0, n - k), slice(n - k, n)
    at = np.sort(np.array([rnd.randrange(n - k + 1) for _ in range(k)]))
    rl._items = np.insert(rl._items[head], at, rl._items[tail])
    rl._seeds = np.insert(rl._seeds[head], at, rl._seeds[tail])


# The window a stream of m symbols passes in, measured with --stream-per-diff (30 seeds,
# n = 10^4, d = 100..1000): decodes in 2 round trips from m >= 0.95 d + 10, stays within
# 2.0 x 32 d bytes up to m <= 3.69 d - 37 (see rateless.STREAM_FACTOR; the RL_REQUEST's
# first flight is as long as the former one's RL message, so the bound stands).
WINDOW_NEED = (0.95, 10)
WINDOW_CAP = (3.69, 37)
ESTIMATE_FACTORS = (1.5, 1.6, 1.65, 1.7, 1.8, 1.9, 2.0)


def simulated_observations(n, d, rnd):
    """What R sees of a random difference of d keys between sets of n: its first k1 symbols
    compared exactly and I's probes (2 bits; a changed symbol matches with chance 1/4).
    The difference's symbols are those of the differing keys alone (common keys cancel)."""
    import numpy as np
    from tssb.setu.rateless_prefix import RatelessPrefix
    k1 = RL.FIRST_SYMBOLS
    probes = RL.probe_indices(k1, min(RL.prefix_length(n), RL.PREFIX_PER_ELEMENTS * n + 64))
    diff = RatelessPrefix(max(probes + [k1]) + 1)
    for _ in range(d):
        diff.add_key(rnd.randbytes(5))
    diff.flush()
    obs = [(i, diff.symbol_int(i) == 0, 0.0) for i in range(k1)]
    return obs + [(g, RL.probe_value(diff.symbol_int(g)) == 0, RL.PROBE_FALSE_EQUAL)
                  for g in probes]


def estimates(sizes, diffs, runs, rnd):
    import numpy as np
    for n in sizes:
        for d in diffs:
            est = np.array([RL.estimate_difference(simulated_observations(n, d, rnd), 1,
                                                   2 * n + d) for _ in range(runs)])
            lg = np.log(est / d)
            row = {"bench": "setu", "case": "estimate n=%d d=%d" % (n, d), "n": n, "d": d,
                   "runs": runs, "log_mean": round(float(lg.mean()), 3),
                   "log_sd": round(float(lg.std()), 3),
                   "quantiles_1_5_50_95_99": [round(float(x), 2) for x in
                                              np.exp(np.quantile(lg, [.01, .05, .5, .95, .99]))]}
            for f in ESTIMATE_FACTORS + (None,):     # None: the profile's own rule
                m = np.array([RL.stream_length(RL.FIRST_SYMBOLS, e) for e in est]) if f is None \
                    else RL.FIRST_SYMBOLS + (f * est).astype(int) + RL.STREAM_EXTRA
                ok = (m >= WINDOW_NEED[0] * d + WINDOW_NEED[1]) \
                    & (m <= WINDOW_CAP[0] * d - WINDOW_CAP[1])
                key = "in_window_" + ("rule" if f is None else "%.2f" % f)
                row[key] = round(float(ok.mean()), 3)
            print(json.dumps(row), flush=True)


def upkeep(common, n, rnd, repeats=3):
    """Amortised cost of appending to a set that keeps only the rateless state: hash, key
    index, queued key, one batched prefix update for all appended elements. The same appends
    are timed `repeats` times on fresh copies; the figure is the fastest (the others are
    printed too: on a shared machine they carry other jobs' load)."""
    extra = [rnd.randbytes(ELEMENT_SIZE) for _ in range(UPKEEP_APPENDS)]
    runs = []
    for _ in range(repeats):
        up = common.copy()
        t1 = time.perf_counter()
        for e in extra:
            up.add(e)
        up.rateless(RL.prefix_length(len(up)))
        runs.append((time.perf_counter() - t1) / UPKEEP_APPENDS * 1e6)
        del up
    print(json.dumps({"bench": "setu", "case": "upkeep rateless n=%d" % n, "n": n,
                      "appended": UPKEEP_APPENDS, "prefix": RL.prefix_length(n + UPKEEP_APPENDS),
                      "us_per_element": round(min(runs), 2),
                      "us_per_element_runs": [round(x, 2) for x in runs]}), flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--profile", default="rateless", choices=sorted(PROFILE_IDS),
                   help="profile to measure first (the others follow for comparison)")
    p.add_argument("--elements", default="random32", choices=("random32",),
                   help="element kind: random32 = random 32-byte elements")
    p.add_argument("--sizes", default="10000,100000",
                   help="set sizes per side (10^6 works; its GNUnet/tssb2 state takes minutes)")
    p.add_argument("--diffs", default="1,10,100,1000")
    p.add_argument("--gnunet-max", type=int, default=100000,
                   help="largest set size also run with the GNUnet profile (its IBFs are "
                        "rebuilt per size, O(n) in Python)")
    p.add_argument("--tssb2-max", type=int, default=10 ** 6,
                   help="largest set size also run with the tssb2 profile")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--spread", default="last", choices=("last", "uniform"),
                   help="where the differing elements sit in the kept key order: appended "
                        "last (as in an append-only store) or at random positions")
    p.add_argument("--first-at", default="responder", choices=("responder", "initiator"),
                   help="side of the first differing element (and every second one after it): "
                        "at d = 1 the responder's case (1 round trip) or the initiator's (2)")
    p.add_argument("--stream-per-diff", type=float, default=None, metavar="X",
                   help="rateless: stream X symbols per true difference instead of sizing "
                        "the stream from the estimate (measures the window that passes)")
    p.add_argument("--stream-factor", type=float, default=None, metavar="F",
                   help="rateless: stream F symbols per estimated difference at every estimate "
                        "instead of rateless.stream_factor's rising rule (paired comparisons "
                        "over seeds)")
    p.add_argument("--estimates", type=int, default=0, metavar="N",
                   help="only simulate the responder's estimate of d, N differences per d")
    args = p.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    diffs = [int(x) for x in args.diffs.split(",")]
    order = [args.profile] + [q for q in ("tssb2", "gnunet") if q != args.profile]
    rnd = random.Random(args.seed)
    if args.stream_factor is not None:
        RL.STREAM_FACTOR = RL.STREAM_FACTOR_SMALL = args.stream_factor
    if args.estimates:
        return estimates(sizes, diffs, args.estimates, rnd)
    spread_rnd = random.Random(args.seed + 10 ** 6)   # the same sets for both placements
    for n in sizes:
        t0 = time.perf_counter()
        common = ElementSet()
        for _ in range(n):
            common.add(rnd.randbytes(ELEMENT_SIZE))
        t_hash = time.perf_counter() - t0
        profiles = [q for q in order if q == args.profile
                    or (q == "gnunet" and n <= args.gnunet_max)
                    or (q == "tssb2" and n <= args.tssb2_max)]
        state_s = {}
        for q in profiles:
            t1 = time.perf_counter()
            build_state(common, q, n)
            state_s[q] = t_hash + time.perf_counter() - t1
            if q == "rateless":     # before other profiles' structures join every append
                upkeep(common, n, rnd)
        print(json.dumps({"bench": "setu", "case": "state_build", "n": n, "profiles": profiles,
                          "hash_s": round(t_hash, 2),
                          "state_s": {q: round(v, 2) for q, v in state_s.items()},
                          "us_per_element": {q: round(v / n * 1e6, 2) for q, v in state_s.items()}}),
              flush=True)
        for d in diffs:
            extra = [rnd.randbytes(ELEMENT_SIZE) for _ in range(d)]
            for q in profiles:
                A, B = common.copy(), common.copy()
                first = 1 if args.first_at == "responder" else 0
                for i, e in enumerate(extra):   # two-sided: half new on each side
                    (A if i % 2 == first else B).add(e)
                build_state(A, q, n)
                build_state(B, q, n)
                if q == "rateless" and args.spread == "uniform":
                    spread_uniform(A, d // 2, spread_rnd)
                    spread_uniform(B, d - d // 2, spread_rnd)
                if args.stream_per_diff is not None:
                    RL.stream_length = lambda k1, d_est, d=d: max(
                        k1 + 1, int(args.stream_per_diff * d))
                a = Reconciler(A, True, Config(profile_id=PROFILE_IDS[q]))
                b = Reconciler(B, False, Config())
                t1 = time.perf_counter()
                st, depth = run_pair(a, b)
                wall = time.perf_counter() - t1
                assert A.checksum == B.checksum and len(A) == n + d
                total = st["ab"][0] + st["ba"][0]
                elem_bytes = st["ab"][1] + st["ba"][1]
                if q == "rateless":   # elements travel inside RL messages: count their payload
                    elem_bytes = ELEMENT_SIZE * (a.stats["elements_sent"] + b.stats["elements_sent"])
                recon = total - elem_bytes
                lb = lower_bound_bytes(d)
                naive = 8 * (n + d // 2) + 8 * d  # all IDs one way, the missing IDs back
                row = {
                    "bench": "setu", "case": "%s n=%d d=%d" % (q, n, d),
                    "profile": q, "n": n, "d": d, "mode": a.stats["mode"], "spread": args.spread,
                    "first_at": args.first_at,
                    "bytes_total": total, "round_trips": (depth + 1) // 2,
                    "ratio_32d": round(total / (ELEMENT_SIZE * d), 2) if d else None,
                    "state_s": round(state_s[q], 2), "sync_s": round(wall, 3),
                    "wall_s": round(wall, 3),
                    "bytes_i_to_r": st["ab"][0], "bytes_r_to_i": st["ba"][0],
                    "recon_bytes": recon,
                    "ibf_rounds": 0 if q == "rateless" else a.stats["rounds"] + b.stats["rounds"],
                    "decode_failures": a.stats.get("decode_failures", 0)
                    + b.stats.get("decode_failures", 0),
                    "lower_bound_bytes": round(lb, 1), "naive_bytes": naive,
                    "recon_bytes_per_diff": round(recon / d, 1) if d else None,
                    "ratio": round(recon / lb, 2) if d else None,
                    "ratio_naive": round(naive / lb, 2) if d else None,
                }
                if q == "rateless":
                    row.update(symbols=a.stats["symbols_sent"] + b.stats["symbols_sent"],
                               estimate=b.stats["estimate"],
                               fallback=a.stats["fallback"] or b.stats["fallback"],
                               prefix_extended=a.stats["prefix_extended"]
                               or b.stats["prefix_extended"],
                               more_rounds=a.stats["more_rounds"],
                               searched=a.stats["assisted"] + b.stats["assisted"],
                               search_tests=a.stats["search_tests"] + b.stats["search_tests"])
                print(json.dumps(row), flush=True)
                del A, B


if __name__ == "__main__":
    main()
