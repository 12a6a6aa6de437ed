"""(count, XOR) aggregate laws the walk relies on (union, subtraction, inference)."""
from hypothesis import given, settings, strategies as st

from tinyssb.aggregate import Aggregate
from tssb.trdag.session import HASH_LEN

keys = st.binary(min_size=HASH_LEN, max_size=HASH_LEN)
sets = st.frozensets(keys, max_size=30)


@settings(max_examples=150, deadline=None)
@given(sets, sets, sets)
def test_union_of_disjoint_sets(a, b, c):
    b, c = b - a, c - a - b
    A, B, C = (Aggregate.of(HASH_LEN, s) for s in (a, b, c))
    assert A.union(B) == Aggregate.of(HASH_LEN, a | b)
    assert A.union(B) == B.union(A)
    assert A.union(B).union(C) == A.union(B.union(C))
    assert A.union(Aggregate(HASH_LEN)) == A


@settings(max_examples=150, deadline=None)
@given(sets, sets)
def test_sibling_inference_by_subtraction(left, right):
    right = right - left
    parent = Aggregate.of(HASH_LEN, left | right)
    L = Aggregate.of(HASH_LEN, left)
    assert parent.minus(L) == Aggregate.of(HASH_LEN, right)
    assert parent.minus(L).union(L) == parent
    assert parent.minus(parent).is_empty()


@settings(max_examples=100, deadline=None)
@given(sets, keys)
def test_add_remove_and_single(s, k):
    A = Aggregate.of(HASH_LEN, s)
    B = Aggregate.of(HASH_LEN, s)
    B.add(k)
    B.remove(k)
    assert A == B
    one = Aggregate.of(HASH_LEN, [k])
    assert one.single() == k and one.count == 1


@settings(max_examples=100, deadline=None)
@given(st.frozensets(keys, min_size=1, max_size=20), keys)
def test_different_sets_differ(s, k):
    # changing membership changes the aggregate (count, or XOR for a same-size swap)
    t = set(s)
    t.discard(next(iter(s)))
    t.add(k)
    if t != set(s):
        assert Aggregate.of(HASH_LEN, t) != Aggregate.of(HASH_LEN, s)
