"""trDAG benchmark: rounds and bytes of the basic walk and the multi-level variant versus
a naive baseline (send all hashed IDs) and the lower bound (missing IDs sent once).

Scenario: side A holds a DAG of `size` messages (a chain: one message per depth) plus
`missing` concurrent side messages at random depths that nothing references yet (late
arrivals of other writers); side B lacks exactly those. Scattered differences are the
hard case for a depth walk; "missing on top" (new messages) costs only the depth exchange.

Prints one JSON object per line. Run: .venv/bin/python tools/bench_trdag.py [--quick]
"""
import json
import random
import sys
import time

from tinyssb import entry
from tssb.trdag import dagstore, driver, message, session

SIZES = (1000, 100000)
MISSING = (1, 10, 100, 1000)
VARIANTS = [
    ("naive", session.NAIVE),
    ("basic", session.BASIC),
    ("multi-l2-c4", session.Options(levels=2, cutoff=4)),
    ("multi-l3-c8", session.FAST),
    ("multi-l4-c16", session.Options(levels=4, cutoff=16)),
]
# At 10^5 messages a session costs seconds (hashing every ID with the session salt), so
# the large DAG runs the baseline, the spec's walk and the default variant only.
LARGE = 50000
VARIANTS_LARGE = ("naive", "basic", "multi-l3-c8")


def build(size, seed=1):
    """Returns (index with root + chain of `size`, root, per-depth mids, authors)."""
    rng = random.Random(seed)
    authors = []
    for _ in range(4):
        fid, sign = message.signer(bytes(rng.getrandbits(8) for _ in range(32)))
        authors.append(entry.Author(fid, sign))
    idx = dagstore.MemDagIndex()
    root = message.create(authors[0], None, [], 0, "root")
    idx.put(root)
    by_depth = [root.mid]
    for d in range(1, size + 1):
        m = message.create(authors[d % 3], root.mid, [by_depth[-1]], d, "m%d" % d)
        idx.put(m)        # built by us, valid by construction: skip admission for speed
        by_depth.append(m.mid)
    return idx, root.mid, by_depth, authors


def run_case(base, root, by_depth, late_author, size, missing, rng):
    b = base
    a = base.copy()
    for _ in range(missing):
        d = rng.randrange(0, size)             # side message at depth d+1, child at depth d
        a.put(message.create(late_author, root, [by_depth[d]], d + 1, "late"))
    out = []
    for name, opt in VARIANTS:
        if size >= LARGE and name not in VARIANTS_LARGE:
            continue
        sa = session.SyncSession(dagstore.Dag(a), root, True, opt)
        sb = session.SyncSession(dagstore.Dag(b.copy()), None, False)
        t0 = time.perf_counter()
        driver.run_local(sa, sb)
        dt = time.perf_counter() - t0
        if sb.stats.elements_recv != missing:
            raise SystemExit("benchmark scenario broken: %d received" % sb.stats.elements_recv)
        st = sa.stats
        out.append({"variant": name, "rounds": st.rounds,
                    "recon_bytes": st.recon_bytes_sent + st.recon_bytes_recv,
                    "data_bytes": st.bytes_sent - st.recon_bytes_sent
                    + st.bytes_recv - st.recon_bytes_recv,
                    "elements": st.elements_sent + st.elements_recv, "seconds": round(dt, 3)})
    naive = out[0]
    lb = {"variant": "lower_bound", "rounds": 1, "recon_bytes": missing * session.HASH_LEN}
    rows = []
    for r in out + [lb]:
        row = {"bench": "trdag", "case": "size=%d,missing=%d,%s" % (size, missing, r["variant"]),
               "size": size, "missing": missing}
        row.update(r)
        row["ratio"] = round(r["recon_bytes"] / naive["recon_bytes"], 4)   # bytes vs naive
        row["ratio_rounds"] = round(r["rounds"] / naive["rounds"], 3)
        row["ratio_vs_lower_bound"] = round(r["recon_bytes"] / lb["recon_bytes"], 2)
        rows.append(row)
    return rows


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    sizes = (1000, 10000) if "--quick" in argv else SIZES
    for size in sizes:
        base, root, by_depth, authors = build(size)
        rng = random.Random(size)
        for missing in MISSING:
            if missing > size:
                continue
            for row in run_case(base, root, by_depth, authors[3], size, missing, rng):
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
