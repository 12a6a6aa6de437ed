"""Flat-tree addressing of the Merkle nodes over a feed (the Dat/Hypercore numbering).

Every node of the infinite binary tree over leaves 0, 1, 2, ... gets one natural number,
its in-order position; leaves are the even numbers, a node of depth d is 2^d - 1 modulo
2^(d+1). The map is a bijection between naturals and tree nodes, so a node's address is a
single small integer (8 bytes on the wire) and the nodes of one depth are an arithmetic
sequence (array-friendly):

    depth 3                         7
    depth 2             3                       11
    depth 1       1           5           9           13
    depth 0    0     2     4     6     8     10    12    14
    leaf       0     1     2     3     4     5     6     7

    index(d, o) = o * 2^(d+1) + 2^d - 1     (o = offset: position among nodes of depth d)
    depth(i)    = number of trailing 1 bits of i

A node of depth d and offset o covers leaves [o * 2^d, (o + 1) * 2^d). In the certificate
spec, "hash<d> of message s" is the node of depth d whose last leaf is s; it exists iff
s + 1 is a multiple of 2^d.

The roots of a feed of n leaves ("peaks", `full_roots`) are the maximal complete subtrees
left to right: one per set bit of n, biggest first (n = 7 = 0b111: nodes 3, 9, 12 covering
leaves 0-3, 4-5, 6).

All functions are pure and take non-negative ints; they raise ValueError on negative input.
"""


def _check(i):
    if i < 0:
        raise ValueError("flat-tree index must be >= 0")


def index(depth, offset):
    """Flat index of the node at `depth` with `offset`.

    Args:
        depth: 0 for leaves. offset: position among the nodes of that depth (0-based).
    Returns:
        int flat index.
    """
    _check(depth)
    _check(offset)
    return (offset << (depth + 1)) | ((1 << depth) - 1)


def depth(i):
    """Depth of node i (0 for leaves): the number of trailing one bits."""
    _check(i)
    return ((i ^ (i + 1)).bit_length()) - 1


def offset(i):
    """Offset of node i among the nodes of its depth."""
    return i >> (depth(i) + 1)


def leaf(n):
    """Flat index of leaf n."""
    _check(n)
    return 2 * n


def parent(i):
    """Flat index of the parent of node i."""
    d = depth(i)
    return index(d + 1, offset(i) >> 1)


def sibling(i):
    """Flat index of the other child of i's parent."""
    d = depth(i)
    return index(d, offset(i) ^ 1)


def is_left(i):
    """True if node i is the left child of its parent."""
    return offset(i) & 1 == 0


def children(i):
    """(left, right) children of node i, or None for a leaf."""
    d = depth(i)
    if d == 0:
        return None
    o = offset(i)
    return index(d - 1, 2 * o), index(d - 1, 2 * o + 1)


def leaf_span(i):
    """(first, last) leaf covered by node i, inclusive."""
    d = depth(i)
    o = offset(i)
    return o << d, ((o + 1) << d) - 1


def ending_at(d, last_leaf):
    """Flat index of the depth-d node whose last leaf is `last_leaf` ("hash<d>" of it).

    Raises:
        ValueError: last_leaf + 1 is not a multiple of 2^d (no such node).
    """
    _check(d)
    _check(last_leaf)
    if (last_leaf + 1) & ((1 << d) - 1):
        raise ValueError("no depth-%d node ends at leaf %d" % (d, last_leaf))
    return index(d, ((last_leaf + 1) >> d) - 1)


def top_depth(last_leaf):
    """Depth of the highest node ending at `last_leaf`: trailing zeros of last_leaf + 1."""
    _check(last_leaf)
    n = last_leaf + 1
    return (n & -n).bit_length() - 1


def full_roots(n):
    """Roots of the complete subtrees covering leaves [0, n), left to right.

    Args:
        n: number of leaves (>= 0).
    Returns:
        list of flat indices, one per set bit of n, biggest subtree first.
    """
    _check(n)
    out = []
    start = 0
    for d in range(n.bit_length() - 1, -1, -1):
        if n >> d & 1:
            out.append((start << 1) | ((1 << d) - 1))  # index(d, start >> d)
            start += 1 << d
    return out


def root_containing(n, leaf_no):
    """The root of `full_roots(n)` whose span holds leaf `leaf_no`.

    Raises:
        ValueError: leaf_no >= n.
    """
    if not 0 <= leaf_no < n:
        raise ValueError("leaf %d outside a tree of %d leaves" % (leaf_no, n))
    start = 0
    for d in range(n.bit_length() - 1, -1, -1):
        if n >> d & 1:
            if leaf_no < start + (1 << d):
                return (start << 1) | ((1 << d) - 1)
            start += 1 << d
    raise AssertionError("unreachable")


def path(leaf_no, root):
    """Nodes from leaf `leaf_no` up to (excluding) `root`, bottom up.

    Returns:
        list of flat indices [leaf, parent, ...]; its length is depth(root).
    Raises:
        ValueError: root does not cover the leaf.
    """
    first, last = leaf_span(root)
    if not first <= leaf_no <= last:
        raise ValueError("node %d does not cover leaf %d" % (root, leaf_no))
    out = []
    i = leaf(leaf_no)
    while i != root:
        out.append(i)
        i = parent(i)
    return out
