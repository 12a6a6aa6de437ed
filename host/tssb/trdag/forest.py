"""Replication forest addressing: pure functions over depth ranges.

Depth 0 is the root (known to both sides, not replicated). Depths 1..d are split by the
binary decomposition of d into trees of 2^i leaves, largest first (spec, "Tree Structure"):

    d = 23 = 10111b      tree 1: depths  1..16  (2^4 leaves)
                         tree 2: depths 17..20  (2^2)
                         tree 3: depths 21..22  (2^1)
                         tree 4: depth  23      (2^0)

A node is the pair (lo, size): the depths lo .. lo+size-1, size a power of two, aligned in
its tree. Its two children are (lo, size/2) and (lo+size/2, size/2); a leaf has size 1
(one depth, i.e. one set M_i of the split function).

    (1,8)
    ├── (1,4)
    │   ├── (1,2) ── (1,1) (2,1)
    │   └── (3,2) ── (3,1) (4,1)
    └── (5,4) ...
"""


def trees(d):
    """Roots of the forest over depths 1..d, largest tree first. Returns list of (lo, size)."""
    out = []
    lo = 1
    bit = 1 << max(d.bit_length() - 1, 0)
    while bit:
        if d & bit:
            out.append((lo, bit))
            lo += bit
        bit >>= 1
    return out


def descend(node, levels):
    """The descendants `levels` tree levels below node (or its leaves, if nearer), in
    depth order. levels=1 gives the two children."""
    lo, size = node
    sub = max(1, size >> levels)
    return [(lo + i, sub) for i in range(0, size, sub)]


def contains(node, depth):
    lo, size = node
    return lo <= depth < lo + size


def last(node):
    """Deepest depth covered by node."""
    return node[0] + node[1] - 1
