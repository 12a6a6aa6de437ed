"""Forest addressing, checked exhaustively for small depths."""
from tssb.trdag import forest


def leaves(node, levels):
    if node[1] == 1:
        return [node[0]]
    out = []
    for c in forest.descend(node, levels):
        out.extend(leaves(c, levels))
    return out


def test_trees_cover_each_depth_once_largest_first():
    for d in range(0, 300):
        ts = forest.trees(d)
        assert len(ts) == bin(d).count("1")
        sizes = [s for _, s in ts]
        assert sizes == sorted(sizes, reverse=True)
        assert all(s & (s - 1) == 0 for s in sizes)
        covered = []
        for t in ts:
            covered.extend(range(t[0], forest.last(t) + 1))
        assert covered == list(range(1, d + 1))


def test_spec_example_23():
    assert forest.trees(23) == [(1, 16), (17, 4), (21, 2), (23, 1)]
    assert [s.bit_length() - 1 for _, s in forest.trees(15)] == [3, 2, 1, 0]


def test_descend_partitions_every_node_to_its_leaves():
    for d in range(1, 70):
        for t in forest.trees(d):
            for levels in range(1, 5):
                kids = forest.descend(t, levels)
                assert kids[0][0] == t[0] and forest.last(kids[-1]) == forest.last(t)
                assert len(kids) == min(1 << levels, t[1])
                assert len({s for _, s in kids}) == 1
                assert leaves(t, levels) == list(range(t[0], forest.last(t) + 1))
                for k in kids:
                    assert all(forest.contains(t, x) for x in range(k[0], forest.last(k) + 1))
