"""The pure Ed25519 (tinyssb.ed25519) against PyNaCl/libsodium, and crypto's backend choice.

The plain engine runs here under CPython; the viper engine the boards use runs under the
venv's MicroPython in test_board_engine_agrees_with_pynacl_under_micropython.

Edge cases are built with a tiny affine Edwards implementation below (written
independently of the module under test, textbook formulas with one inversion per
operation), then both verifiers must give the same verdict as libsodium, the reference
the deployed nodes use.
"""
import os
import random
import subprocess
import sys
from functools import lru_cache
from importlib import util as importlib_util

import nacl.bindings as sodium
import pytest

from tinyssb import crypto, ed25519

# --- independent affine arithmetic on edwards25519 (RFC 8032 5.1) --------------------------
P = 2 ** 255 - 19
L = 2 ** 252 + 27742317777372353535851937790883648493
D = -121665 * pow(121666, P - 2, P) % P
IDENTITY = (0, 1)


def inv(x):
    return pow(x, P - 2, P)


def add(p1, p2):
    (x1, y1), (x2, y2) = p1, p2
    t = D * x1 * x2 * y1 * y2 % P
    return ((x1 * y2 + x2 * y1) * inv(1 + t) % P, (y1 * y2 + x1 * x2) * inv(1 - t) % P)


def neg(pt):
    return ((-pt[0]) % P, pt[1])


def mul(k, pt):
    acc = IDENTITY
    while k:
        if k & 1:
            acc = add(acc, pt)
        pt = add(pt, pt)
        k >>= 1
    return acc


def enc(pt):
    return (pt[1] | ((pt[0] & 1) << 255)).to_bytes(32, "little")


def dec(b):
    """RFC 8032 5.1.3 decoding (strict: y < p), or None."""
    y = int.from_bytes(b, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    if y >= P:
        return None
    x2 = (y * y - 1) * inv(D * y * y + 1) % P
    x = pow(x2, (P + 3) // 8, P)
    if (x * x - x2) % P:
        x = x * pow(2, (P - 1) // 4, P) % P
    if (x * x - x2) % P:
        return None
    if x == 0 and sign:
        return None
    if (x & 1) != sign:
        x = P - x
    return (x, y)


B = dec((4 * inv(5) % P).to_bytes(32, "little"))


def h_int(*parts):
    return int.from_bytes(sodium.crypto_hash_sha512(b"".join(parts)), "little") % L


def nacl_verify(pub, msg, sig):
    try:
        sodium.crypto_sign_open(sig + msg, pub)
        return True
    except Exception:
        return False


def both(pub, msg, sig):
    """(pure verdict, libsodium verdict)."""
    return ed25519.verify(pub, msg, sig), nacl_verify(pub, msg, sig)


def _torsion8():
    """A point of order exactly 8, found as [L]Q for points Q of small y."""
    y = 2
    while True:
        q = dec(y.to_bytes(32, "little"))
        y += 1
        if q is None:
            continue
        t = mul(L, q)
        if mul(4, t) != IDENTITY:
            assert mul(8, t) == IDENTITY
            return t


T8 = _torsion8()
SMALL = [mul(k, T8) for k in range(8)]     # the whole torsion subgroup


# --- random agreement ----------------------------------------------------------------------
def test_random_keys_and_messages_agree_with_pynacl():
    rnd = random.Random(8032)
    for i in range(60):
        seed = rnd.randbytes(32)
        msg = rnd.randbytes(rnd.choice((0, 1, 55, 120, 200, 1000)))
        pk, sk = sodium.crypto_sign_seed_keypair(seed)
        assert ed25519.publickey(seed) == pk
        sig = ed25519.sign(seed, msg)
        assert sig == sodium.crypto_sign(msg, sk)[:64]
        assert ed25519.sign(seed, msg, pk) == sig
        assert both(pk, msg, sig) == (True, True)
        # A single flipped bit anywhere: libsodium and we reject alike.
        for which in ("sig", "msg", "pub"):
            s, m, p = bytearray(sig), bytearray(msg or b"\0"), bytearray(pk)
            t = {"sig": s, "msg": m, "pub": p}[which]
            bit = rnd.randrange(len(t) * 8)
            t[bit >> 3] ^= 1 << (bit & 7)
            m2 = bytes(m) if (msg or which == "msg") else msg
            r = both(bytes(p), m2, bytes(s))
            assert r[0] == r[1], (which, bit, r)
            assert r == (False, False) or which == "pub", (which, bit, r)


def test_crypto_module_agrees_both_ways():
    rnd = random.Random(7)
    for _ in range(20):
        seed = crypto.new_seed()
        msg = rnd.randbytes(rnd.randrange(300))
        pub = crypto.publickey(seed)
        assert pub == ed25519.publickey(seed)
        sig = crypto.sign(seed, msg)
        assert ed25519.verify(pub, msg, sig)
        assert crypto.verify(pub, msg, ed25519.sign(seed, msg))
        assert not crypto.verify(pub, msg + b"!", sig)


# --- libsodium's acceptance rules ------------------------------------------------------------
def _valid(seed=b"\x42" * 32, msg=b"tinyssb"):
    pk, sk = sodium.crypto_sign_seed_keypair(seed)
    return pk, msg, sodium.crypto_sign(msg, sk)[:64]


def test_s_not_reduced_is_rejected():
    pk, msg, sig = _valid()
    s = int.from_bytes(sig[32:], "little")
    assert s + L < 2 ** 256
    # [S+L]B = [S]B, so only the S < L rule can reject this.
    for bad in (s + L, L, 2 ** 256 - 1, s | (1 << 255)):
        forged = sig[:32] + bad.to_bytes(32, "little")
        assert both(pk, msg, forged) == (False, False), bad
    assert both(pk, msg, sig[:32] + (L - 1).to_bytes(32, "little")) == (False, False)


def test_small_order_public_keys_are_rejected():
    # For A of small order, [h]A = 0 for about one message in eight; then R = [r]B, S = r
    # satisfies [S]B = R + [h]A exactly. libsodium rejects every such key by its y
    # blacklist (sign bit ignored, non-canonical aliases of 0 and 1 included).
    rnd = random.Random(1)
    keys = {}
    for t in SMALL:
        e = enc(t)
        keys[e] = t
        if t[0] == 0:                                   # "negative zero": sign bit with x = 0
            keys[e[:31] + bytes([e[31] | 0x80])] = t
    keys[P.to_bytes(32, "little")] = dec(bytes(32))      # y = p, alias of y = 0
    keys[(P + 1).to_bytes(32, "little")] = IDENTITY      # y = p + 1, alias of y = 1
    assert len(keys) == 12
    for a, pt in sorted(keys.items()):
        r = rnd.randrange(1, L)
        R = enc(mul(r, B))
        sig = R + r.to_bytes(32, "little")
        i = 0
        while mul(h_int(R, a, b"m%d" % i), pt) != IDENTITY:
            i += 1
        assert both(a, b"m%d" % i, sig) == (False, False), a.hex()


def test_mixed_order_key_is_checked_exactly_like_libsodium():
    # A = [a]B + T8 is not small order: libsodium accepts it, without cofactor, iff the
    # torsion part cancels, i.e. h = 0 mod 8 when R = [r]B and S = r + h*a.
    rnd = random.Random(2)
    a = rnd.randrange(1, L)
    A = add(mul(a, B), T8)
    pk = enc(A)
    r = rnd.randrange(1, L)
    R = enc(mul(r, B))
    seen = {True: 0, False: 0}
    i = 0
    while min(seen.values()) < 3:
        msg = b"mixed %d" % i
        i += 1
        h = h_int(R, pk, msg)
        sig = R + ((r + h * a) % L).to_bytes(32, "little")
        expect = h % 8 == 0
        assert both(pk, msg, sig) == (expect, expect), (i, h % 8)
        seen[expect] += 1


def test_small_order_r_is_rejected_even_when_the_equation_holds():
    # A = [a]B + T8, S = h*a: [S]B - [h]A = -[h]T8, a small-order point. Choose R as that
    # point for k = h mod 8 and search messages with that k: the group equation then holds
    # and only libsodium's small-order R rule rejects.
    rnd = random.Random(3)
    a = rnd.randrange(1, L)
    pk = enc(add(mul(a, B), T8))
    found = 0
    for k in range(1, 8):
        R = enc(neg(mul(k, T8)))
        for i in range(200):
            msg = b"r%d-%d" % (k, i)
            h = h_int(R, pk, msg)
            if h % 8 != k:
                continue
            s = h * a % L
            lhs = add(mul(s, B), neg(mul(h, dec(pk))))
            assert enc(lhs) == R                    # the equation holds
            sig = R + s.to_bytes(32, "little")
            assert both(pk, msg, sig) == (False, False)
            found += 1
            break
    assert found == 7


def test_non_canonical_and_off_curve_encodings_are_rejected():
    pk, msg, sig = _valid()
    # y >= p for the key: values p+2 .. p+18 (whatever decodes or not) and 2**255 - 1.
    for y in list(range(P + 2, P + 19)) + [2 ** 255 - 1]:
        for sb in (0, 1):
            a = (y | (sb << 255)).to_bytes(32, "little")
            assert both(a, msg, sig) == (False, False), y - P
    # The same for R (compared byte for byte with a canonical encoding).
    for y in list(range(P, P + 19)):
        assert both(pk, msg, y.to_bytes(32, "little") + sig[32:]) == (False, False)
    # Keys whose y gives no x (not on the curve).
    off = 0
    for y in range(2, 200):
        e = y.to_bytes(32, "little")
        if dec(e) is None:
            off += 1
            assert both(e, msg, sig) == (False, False), y
    assert off > 10
    # R with its sign bit flipped: a different point.
    flipped = sig[:31] + bytes([sig[31] ^ 0x80]) + sig[32:]
    assert both(pk, msg, flipped) == (False, False)


def test_malformed_inputs_never_raise():
    pk, msg, sig = _valid()
    bad = [
        (pk[:31], msg, sig), (pk + b"\0", msg, sig), (pk, msg, sig[:63]),
        (pk, msg, sig + b"\0"), (None, msg, sig), (pk, None, sig), (pk, msg, None),
        ("x" * 32, msg, sig), (pk, "text", sig), (b"", b"", b""), (12, 3, 4),
    ]
    for args in bad:
        assert ed25519.verify(*args) is False, args
        assert crypto.verify(*args) is False, args
    assert ed25519.verify(bytearray(pk), memoryview(msg), bytearray(sig)) is True
    assert crypto.verify(bytearray(pk), memoryview(msg), bytearray(sig)) is True


def test_sign_rejects_bad_lengths():
    for fn in (ed25519.publickey, crypto.publickey):
        with pytest.raises(ValueError):
            fn(b"\0" * 31)
    with pytest.raises(ValueError):
        ed25519.sign(b"\0" * 33, b"m")
    with pytest.raises(ValueError):
        ed25519.sign(b"\0" * 32, b"m", b"\0" * 31)
    with pytest.raises(ValueError):
        crypto.sign(b"\0" * 31, b"m")


# --- the board engine (viper, under MicroPython) ----------------------------------------------
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MPY = os.path.join(os.path.dirname(sys.executable), "micropython")


@lru_cache(maxsize=1)
def edge_cases():
    """(what, pub, msg, sig, libsodium's verdict) in hex: the cases tests/core/test_ed25519.py
    carries as EDGES so that MicroPython runs check both engines against them."""
    rnd = random.Random(25519)
    cases = []

    def case(what, pub, msg, sig):
        cases.append((what, pub.hex(), msg.hex(), sig.hex(), nacl_verify(pub, msg, sig)))

    keys = {}                         # every small-order key encoding, as above
    for t in SMALL:
        e = enc(t)
        keys[e] = t
        if t[0] == 0:
            keys[e[:31] + bytes([e[31] | 0x80])] = t
    keys[P.to_bytes(32, "little")] = dec(bytes(32))
    keys[(P + 1).to_bytes(32, "little")] = IDENTITY
    for a, pt in sorted(keys.items()):
        r = rnd.randrange(1, L)
        R = enc(mul(r, B))
        i = 0
        while mul(h_int(R, a, b"m%d" % i), pt) != IDENTITY:
            i += 1
        case("small-order key %s..%s, equation holds" % (a.hex()[:4], a.hex()[-2:]), a,
             b"m%d" % i, R + r.to_bytes(32, "little"))
    a = rnd.randrange(1, L)
    pk = enc(add(mul(a, B), T8))
    for k in range(1, 8):                 # small-order R, as above
        R = enc(neg(mul(k, T8)))
        for i in range(400):
            msg = b"r%d-%d" % (k, i)
            h = h_int(R, pk, msg)
            if h % 8 == k:
                case("small-order R (k=%d), equation holds" % k, pk, msg,
                     R + (h * a % L).to_bytes(32, "little"))
                break
    pk, sk = sodium.crypto_sign_seed_keypair(bytes(range(100, 132)))
    msg = b"tinyssb edge"
    sig = sodium.crypto_sign(msg, sk)[:64]
    case("valid", pk, msg, sig)
    s = int.from_bytes(sig[32:], "little")
    for name, bad in (("S + L", s + L), ("S = L", L), ("S = 2^256 - 1", 2 ** 256 - 1),
                      ("S with bit 255", s | (1 << 255))):
        case(name, pk, msg, sig[:32] + bad.to_bytes(32, "little"))
    for y in (P, P + 1, P + 5, P + 18):
        case("R's y = p + %d" % (y - P), pk, msg, y.to_bytes(32, "little") + sig[32:])
    case("R's sign bit flipped", pk, msg, sig[:31] + bytes([sig[31] ^ 0x80]) + sig[32:])
    for y in (P + 2, P + 3, P + 9, 2 ** 255 - 1):
        for sb in (0, 1):
            case("A's y = p + %d, sign %d" % (y - P, sb), (y | (sb << 255)).to_bytes(32, "little"),
                 msg, sig)
    for y in [y for y in range(2, 40) if dec(y.to_bytes(32, "little")) is None][:3]:
        case("A off the curve (y = %d)" % y, y.to_bytes(32, "little"), msg, sig)
        case("R off the curve (y = %d)" % y, pk, msg, y.to_bytes(32, "little") + sig[32:])
    case("A's sign bit flipped", pk[:31] + bytes([pk[31] ^ 0x80]), msg, sig)
    return tuple(cases)


def _core_test_module():
    spec = importlib_util.spec_from_file_location(
        "core_test_ed25519", os.path.join(ROOT, "tests", "core", "test_ed25519.py"))
    mod = importlib_util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_core_edge_cases_carry_libsodiums_verdicts():
    assert list(_core_test_module().EDGES) == list(edge_cases())


_BOARD = """
import sys
sys.path.insert(0, "shared")
from binascii import hexlify, unhexlify
from tinyssb import ed25519
assert ed25519.VIPER
for line in sys.stdin.read().split():
    kind, a, b, c = line.split(",")
    a, b, c = unhexlify(a), unhexlify(b), unhexlify(c)
    if kind == "sign":          # seed, message, -
        pub = ed25519.publickey(a)
        print(hexlify(pub).decode(), hexlify(ed25519.sign(a, b, pub)).decode())
    else:                       # public key, message, signature
        print(ed25519.verify(a, b, c))
"""


@pytest.mark.skipif(not os.path.exists(MPY), reason="no MicroPython unix port in the venv")
def test_board_engine_agrees_with_pynacl_under_micropython():
    # The engine boards run (viper, MicroPython) against libsodium: keys and signatures of
    # random seeds and messages, one flipped bit each, and every edge case above.
    rnd = random.Random(32)
    lines, expect = [], []
    for i in range(40):
        seed = rnd.randbytes(32)
        msg = rnd.randbytes(rnd.choice((1, 55, 120, 200, 1000)))   # (the empty one: RFC 8032)
        pk, sk = sodium.crypto_sign_seed_keypair(seed)
        sig = sodium.crypto_sign(msg, sk)[:64]
        lines.append("sign,%s,%s,00" % (seed.hex(), msg.hex()))
        expect.append("%s %s" % (pk.hex(), sig.hex()))
        lines.append("verify,%s,%s,%s" % (pk.hex(), msg.hex(), sig.hex()))
        expect.append("True")
        for which in (0, 1, 2):
            p, m, s = bytearray(pk), bytearray(msg), bytearray(sig)
            t = (p, m, s)[which]
            bit = rnd.randrange(len(t) * 8)
            t[bit >> 3] ^= 1 << (bit & 7)
            lines.append("verify,%s,%s,%s" % (p.hex(), m.hex(), s.hex()))
            expect.append(str(nacl_verify(bytes(p), bytes(m), bytes(s))))
    for what, pub, msg, sig, ok in edge_cases():
        lines.append("verify,%s,%s,%s" % (pub, msg, sig))
        expect.append(str(ok))
    out = subprocess.run([MPY, "-c", _BOARD], input="\n".join(lines), capture_output=True,
                         text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    got = out.stdout.strip().split("\n")
    assert len(got) == len(expect)
    for line, g, e in zip(lines, got, expect):
        assert g == e, line


# --- backend selection -----------------------------------------------------------------------
def test_backend_is_nacl_on_this_host():
    assert crypto.BACKEND == "nacl"
    seed = crypto.new_seed()
    assert len(seed) == 32 and seed != crypto.new_seed()


def _run(code, env_extra=None, block_nacl=False):
    pre = "import sys\n"
    if block_nacl:
        pre += "sys.modules['nacl'] = None\n"
    env = dict(os.environ)
    env.pop("TSSB_CRYPTO", None)
    env.update(env_extra or {})
    out = subprocess.run([sys.executable, "-c", pre + code], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


_PROBE = """
from tinyssb import crypto
seed = bytes(range(32))
pub = crypto.publickey(seed)
sig = crypto.sign(seed, b"probe")
print(crypto.BACKEND, pub.hex(), sig.hex(), crypto.verify(pub, b"probe", sig),
      crypto.verify(pub, b"probe!", sig), len(crypto.new_seed()))
"""


def test_backend_falls_back_to_pure_without_nacl_and_matches():
    nacl_out = _run(_PROBE)
    pure_out = _run(_PROBE, block_nacl=True)
    forced = _run(_PROBE, env_extra={"TSSB_CRYPTO": "pure"})
    assert nacl_out[0] == "nacl"
    assert pure_out[0] == "pure" and forced[0] == "pure"
    assert nacl_out[1:] == pure_out[1:] == forced[1:]
    assert nacl_out[3:] == ["True", "False", "32"]
