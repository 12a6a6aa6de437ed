"""The benchmark's level-by-level tree gives the same nodes as the incremental records."""
import importlib.util
import os

from tssb.certs import certificate as cm
from tssb.certs import flattree

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "bench_certs", os.path.join(HERE, "..", "..", "tools", "bench_certs.py"))
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_synthetic_tree_matches_certlog(feed1024):
    n = 256
    leaves = b"".join(feed1024.log.mid(s) for s in range(1, n + 1))
    tree = bench.SyntheticTree(feed1024.fid, leaves)
    for i in range(2 * n - 1):
        assert tree.node(i) == feed1024.log.node(i)
    for seq in (1, 5, 100, 255, 256):
        rec, ref = tree.record(seq), feed1024.log.record(seq)
        assert (rec.hashes, rec.bridge) == (ref.hashes, ref.bridge)


def test_naive_verifier_follows_the_chain():
    fid = bench.ED25519.public(bench.SEED)
    blob, last = bench.naive_chain(fid, 5)
    assert bench.naive_verify(fid, blob) == last
    bad = bytearray(blob)
    bad[130] ^= 1
    try:
        bench.naive_verify(fid, bytes(bad))
        raise AssertionError("tampered chain accepted")
    except ValueError:
        pass
    assert cm.layout(5, 5)[1] == len(flattree.full_roots(5))
