"""Flat-tree addressing, checked exhaustively against an explicitly built tree."""
import pytest

from tssb.certs import flattree as ft

LEAVES = 1024  # oracle tree over 2^10 leaves: every node index below 2048 - 1


def oracle():
    """Number the nodes of a complete tree over LEAVES leaves by in-order traversal and
    record depth, offset, span, parent and children of each number."""
    info = {}
    counter = [0]

    def walk(d, o):
        if d > 0:
            walk(d - 1, 2 * o)
        i = counter[0]
        counter[0] += 1
        info[i] = {"depth": d, "offset": o, "span": (o << d, ((o + 1) << d) - 1)}
        if d > 0:
            walk(d - 1, 2 * o + 1)
        return i

    top = LEAVES.bit_length() - 1
    walk(top, 0)
    by_pos = {(v["depth"], v["offset"]): k for k, v in info.items()}
    for i, v in info.items():
        d, o = v["depth"], v["offset"]
        v["parent"] = by_pos.get((d + 1, o >> 1))
        v["children"] = None if d == 0 else (by_pos[(d - 1, 2 * o)], by_pos[(d - 1, 2 * o + 1)])
        v["sibling"] = by_pos.get((d, o ^ 1))
    return info


ORACLE = oracle()


def test_numbering_matches_in_order_traversal():
    assert sorted(ORACLE) == list(range(2 * LEAVES - 1))
    for i, v in ORACLE.items():
        assert ft.depth(i) == v["depth"]
        assert ft.offset(i) == v["offset"]
        assert ft.index(v["depth"], v["offset"]) == i
        assert ft.leaf_span(i) == v["span"]
        assert ft.children(i) == v["children"]
        if v["parent"] is not None:
            assert ft.parent(i) == v["parent"]
            assert ft.sibling(i) == v["sibling"]
            assert ft.is_left(i) == (v["offset"] % 2 == 0)


def test_leaves_are_even_and_index_is_a_bijection():
    seen = set()
    for d in range(11):
        for o in range(LEAVES >> d):
            i = ft.index(d, o)
            assert i not in seen
            seen.add(i)
    assert seen == set(range(2 * LEAVES - 1))
    assert [ft.leaf(n) for n in range(5)] == [0, 2, 4, 6, 8]


def test_ending_at_is_hash_k_of_the_spec():
    for s in range(LEAVES):
        for d in range(11):
            if (s + 1) % (1 << d) == 0:
                i = ft.ending_at(d, s)
                assert ft.depth(i) == d and ft.leaf_span(i)[1] == s
                assert d <= ft.top_depth(s)
            else:
                assert d > ft.top_depth(s)
                with pytest.raises(ValueError):
                    ft.ending_at(d, s)


def test_full_roots_partition_the_prefix():
    for n in range(0, LEAVES + 1):
        roots = ft.full_roots(n)
        assert len(roots) == bin(n).count("1")
        nxt = 0
        sizes = []
        for r in roots:
            first, last = ft.leaf_span(r)
            assert first == nxt        # contiguous, left to right
            nxt = last + 1
            sizes.append(last - first + 1)
        assert nxt == n
        assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == len(sizes)
        for leaf_no in range(n):
            q = ft.root_containing(n, leaf_no)
            assert q in roots
            first, last = ft.leaf_span(q)
            assert first <= leaf_no <= last


def test_path_from_every_leaf_to_every_ancestor():
    for q in ORACLE:
        first, last = ft.leaf_span(q)
        for leaf_no in range(first, last + 1):
            p = ft.path(leaf_no, q)
            assert len(p) == ft.depth(q) and (p + [q])[0] == ft.leaf(leaf_no)
            assert all(ft.parent(a) == b for a, b in zip(p, p[1:] + [q]))


def test_peaks_of_a_prefix_appear_on_a_later_path():
    """What linking two certificates relies on: the roots of a's forest are roots of b's
    forest, ancestors of leaf a-1, or left siblings on its path in b's forest."""
    for b in range(1, 200):
        for a in range(1, b + 1):
            q = ft.root_containing(b, a - 1)
            p = ft.path(a - 1, q)
            known = set(ft.full_roots(b)) | set(p) | {q} | {ft.sibling(i) for i in p}
            assert set(ft.full_roots(a)) <= known


def test_bad_input():
    for f in (ft.depth, ft.offset, ft.leaf, ft.full_roots, ft.top_depth):
        with pytest.raises(ValueError):
            f(-1)
    with pytest.raises(ValueError):
        ft.root_containing(4, 4)
    with pytest.raises(ValueError):
        ft.path(5, ft.index(2, 0))
