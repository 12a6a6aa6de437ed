"""Benchmark of Merkle feed certificates: size and verify time versus feed length.

For feed lengths 10, 10^3 and 10^6 it proves the last entry (the worst case for the naive
proof) with the bridging form (anchor = the entry), the compact form (anchor = next power
of two), a middle entry anchored at the last one, and the bridging form's worst case
(entry 2^k - 1 just below that power of two: the most roots), next to the naive proof: every entry
from the first, whose PREV hash chain the verifier recomputes up to the last entry, whose
signature it checks. Signatures are real Ed25519 (PyNaCl) in both.

For 10^6 no million signed entries are built: the tree is computed over synthetic leaf
hashes (random MIDs), except the one real entry that is proved; only the records a
certificate uses are signed. The naive chain is real entries (bogus signatures except
the last one, which is all the naive verifier checks).

Run:  .venv/bin/python tools/bench_certs.py
Prints one JSON object per line: bench, case, n, seq, anchor, bytes, verify_us, and
"ratio" = certificate bytes / naive bytes, "verify_ratio" = certificate verify time /
naive verify time (the naive baseline measured in the same run).
"""
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "shared"), os.path.join(ROOT, "host")]

from tinyssb import entry  # noqa: E402
from tssb.certs import certificate as cm  # noqa: E402
from tssb.certs import flattree  # noqa: E402
from tssb.certs.hashing import HASH_LEN, bridge_hash, node_hash  # noqa: E402
from tssb.certs.keys import ED25519  # noqa: E402
from tssb.certs.records import Record, has_bridge  # noqa: E402

LENGTHS = (10, 1000, 1000000)
SEED = bytes(range(32))
PFX = b"tinyssb-v0"


def emit(**kw):
    print(json.dumps(kw), flush=True)


def best_us(fn, budget_s=0.5, max_runs=200):
    """Fastest of repeated runs (at least 3) within a time budget, in microseconds."""
    best = None
    t_end = time.perf_counter() + budget_s
    runs = 0
    while runs < 3 or (runs < max_runs and time.perf_counter() < t_end):
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best = dt if best is None or dt < best else best
        runs += 1
    return best * 1e6


class SyntheticTree:
    """Merkle levels over `leaves` (bytes, 20 per leaf) with lazily signed records."""

    def __init__(self, fid, leaves):
        self.fid = fid
        self.levels = [bytes(leaves)]
        while len(self.levels[-1]) >= 2 * HASH_LEN:
            lv = self.levels[-1]
            nxt = bytearray()
            for p in range(0, len(lv) - 2 * HASH_LEN + 1, 2 * HASH_LEN):
                nxt += node_hash(lv[p:p + HASH_LEN], lv[p + HASH_LEN:p + 2 * HASH_LEN])
            self.levels.append(bytes(nxt))
        self._recs = {}

    def node(self, i):
        d, o = flattree.depth(i), flattree.offset(i)
        return self.levels[d][o * HASH_LEN:(o + 1) * HASH_LEN]

    def record(self, seq):
        rec = self._recs.get(seq)
        if rec is None:
            k = flattree.top_depth(seq - 1)
            hashes = [self.node(flattree.ending_at(d, seq - 1)) for d in range(k + 1)]
            bridge = None
            if has_bridge(seq):
                bridge = bridge_hash(self.node(flattree.full_roots(seq)[-2]), hashes[-1])
            rec = Record(seq, hashes, bridge, None)
            rec.sig = ED25519.sign(SEED, rec.message(self.fid))
            self._recs[seq] = rec
        return rec


def real_entry(fid, seq, prev):
    pkt, mid = entry.build(fid, seq, prev, entry.PLAIN48, entry.plain48(b"entry %d" % seq),
                           lambda m: ED25519.sign(SEED, m))
    return pkt, mid


def naive_chain(fid, n):
    """n consistent entries as one bytearray (DMX and PREV right; signatures bogus except
    the last). Returns (blob, mid of the last)."""
    from hashlib import sha256
    blob = bytearray(120 * n)
    prev = fid[:HASH_LEN]
    payload = bytes(range(48))
    fake_sig = bytes(64)
    for seq in range(1, n + 1):
        nam = PFX + fid + seq.to_bytes(4, "big") + prev
        if seq < n:
            pkt = sha256(nam).digest()[:7] + b"\x00" + payload + fake_sig
        else:
            pkt, _ = real_entry(fid, seq, prev)
        blob[120 * (seq - 1):120 * seq] = pkt
        prev = sha256(nam + pkt).digest()[:HASH_LEN]
    return bytes(blob), prev


def naive_verify(fid, blob):
    """The naive proof's verifier: DMX and PREV chain of every entry from the first, and
    the last entry's signature. Returns the last MID."""
    from hashlib import sha256
    n = len(blob) // 120
    prev = fid[:HASH_LEN]
    nam = b""
    pkt = b""
    for seq in range(1, n + 1):
        pkt = blob[120 * (seq - 1):120 * seq]
        nam = PFX + fid + seq.to_bytes(4, "big") + prev
        if sha256(nam).digest()[:7] != pkt[:7]:
            raise ValueError("bad chain at %d" % seq)
        prev = sha256(nam + pkt).digest()[:HASH_LEN]
    if not ED25519.verify(fid, nam + pkt[:56], pkt[56:]):
        raise ValueError("bad signature")
    return prev


def bench_length(n):
    fid = ED25519.public(SEED)
    size = cm.next_pow2(n)  # leaves needed for the compact form of entry n
    leaves = bytearray(os.urandom(HASH_LEN * size))
    mid_s = n // 2 + 1
    proved = {}
    worst = size - 1  # 2^k - 1 entries: the most roots, the bridging form's worst case
    for seq in sorted({n, mid_s, worst}):
        prev = fid[:HASH_LEN] if seq == 1 else bytes(leaves[HASH_LEN * (seq - 2):HASH_LEN * (seq - 1)])
        pkt, mid = real_entry(fid, seq, prev)
        leaves[HASH_LEN * (seq - 1):HASH_LEN * seq] = mid
        proved[seq] = (pkt, prev)
    t0 = time.perf_counter()
    tree = SyntheticTree(fid, leaves)
    build_s = time.perf_counter() - t0

    blob, last_mid = naive_chain(fid, n)
    naive_us = best_us(lambda: naive_verify(fid, blob), budget_s=1.0, max_runs=3 if n > 10 ** 5 else 200)
    naive_bytes = len(blob)
    emit(bench="certs", case="naive_chain", n=n, seq=n, anchor=n, bytes=naive_bytes,
         verify_us=round(naive_us, 1), ratio=1.0, verify_ratio=1.0)

    for case, seq, anchor in (("bridging", n, n), ("compact", n, size),
                              ("anchored_middle", mid_s, n),
                              ("bridging_worst", worst, worst)):
        pkt, prev = proved[seq]
        cert = cm.build(fid, seq, anchor, pkt, prev, tree.node, tree.record)
        raw = cert.encode()
        v = cm.verify(raw)
        assert v.mid == bytes(leaves[HASH_LEN * (seq - 1):HASH_LEN * seq])
        us = best_us(lambda: cm.verify(raw))
        d, r, m = cm.layout(seq, anchor)
        emit(bench="certs", case=case, n=n, seq=seq, anchor=anchor, bytes=len(raw),
             siblings=d, roots=r, records=m, signatures=m + 1, verify_us=round(us, 1),
             ratio=round(len(raw) / naive_bytes, 6), verify_ratio=round(us / naive_us, 6),
             tree_build_s=round(build_s, 2))


def main():
    for n in LENGTHS:
        bench_length(n)


if __name__ == "__main__":
    main()
