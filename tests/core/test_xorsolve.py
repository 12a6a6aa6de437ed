# GF(2) subset solving (shared/tinyssb/xorsolve.py). CPython and MicroPython.
from tinyssb.hotloops import xor_bytes
from tinyssb.xorsolve import XorBasis
from support import Rand


def _xor(keys):
    acc = bytes(32)
    for k in keys:
        acc = xor_bytes(acc, k)
    return acc


def test_solve_names_the_subset_exactly():
    r = Rand(3)
    keys = [r.key() for _ in range(100)]
    b = XorBasis(keys)
    assert b.independent()
    for pick in ([5], [0, 99], [3, 17, 42, 64, 80], list(range(0, 100, 7))):
        want = [keys[i] for i in pick]
        assert sorted(b.solve(_xor(want))) == sorted(want)
    assert b.solve(bytes(32)) == []


def test_a_key_outside_the_set_leaves_the_span():
    r = Rand(4)
    keys = [r.key() for _ in range(60)]
    b = XorBasis(keys)
    other = r.key()
    assert b.solve(xor_bytes(keys[1], other)) is None
    assert b.solve(other) is None


def test_dependent_keys_are_detected():
    r = Rand(5)
    keys = [r.key() for _ in range(10)]
    keys.append(_xor(keys[:3]))          # an attacker's combination of our keys
    b = XorBasis(keys)
    assert not b.independent() and b.rank == 10
    got = b.solve(_xor(keys[:3]))
    assert got is not None and _xor(got) == _xor(keys[:3])
