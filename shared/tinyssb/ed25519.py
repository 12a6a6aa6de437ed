"""Ed25519 signatures (RFC 8032 section 5.1) for boards without PyNaCl.

  publickey(seed32)          -> 32-byte public key
  sign(seed32, msg, pub=None) -> 64-byte signature
  verify(pub32, msg, sig64)  -> bool (never raises)

verify() accepts exactly what libsodium's crypto_sign_verify_detached accepts, since the
deployed nodes (ESP32 C++, Android, PyNaCl hosts) use it: S must be < L; R and A must not
encode a small-order point (libsodium's y-coordinate blacklist, sign bit ignored); A's y must
be canonical (< p); A must decode; and [S]B - [h]A must encode to exactly the 32 bytes of R
(no cofactor multiplication, so mixed-order keys are checked exactly as libsodium does).

Two engines compute the same group operations, byte for byte:
- plain Python (CPython, ports without viper): field elements are Python ints mod p, only
  products reduced, inversion and square root by pow();
- native (MicroPython with the viper emitter, i.e. the boards): the same formulas as small
  programs over 13-bit limbs run by one viper function, inversion and square root as one
  addition chain each (a board's big-int pow() costs more than the rest of a verify).
Both use extended twisted Edwards coordinates (Hisil-Wong-Carter-Dawson 2008, a = -1):
doubling 4S+3M (+1M when an addition follows and needs T), addition 8M against a table
entry in projective Niels form; the a = -1 addition law is complete, so adversarial points
cannot reach an exceptional case. verify computes [S]B + [h](-A) in one Straus/Shamir pass
over width-w NAF digits of both scalars: one shared chain of ~253 doublings, ~1/(w+1)
additions per bit per scalar. B's odd multiples (w = BASE_WINDOW) are built once per
engine, on first use; -A's odd multiples (w = KEY_WINDOW) are built per key and kept in a
small cache, because a board verifies many entries of the same few feeds.
docs/ed25519.md has the measured costs.
"""

try:
    from micropython import const
except ImportError:
    def const(x):
        return x

from tinyssb import sha512 as _sha

# Curve constants (RFC 8032 section 5.1).
P = 2 ** 255 - 19
L = 2 ** 252 + 27742317777372353535851937790883648493      # order of B
D = 37095705934669439343138083508754565189542113879843219016388785533085940283555  # -121665/121666
D2 = 16295367250680780974490674513165176452449235426866156013048779062215315747161  # 2*D mod p
SQRT_M1 = 19681161376707505956807079304988542015446066515923890162744021073123829784752
BX = 15112221349535400772501151409588531511454012693041857206046113283949847762202
BY = 46316835694926478169428394003475163141307993866256225615783033603165251855960

_MASK255 = (1 << 255) - 1
_EXP_SQRT = (P - 5) // 8        # RFC 8032 5.1.3 step 2: candidate root exponent

# y-coordinates whose points have small order (1, 2, 4 or 8), as libsodium's
# ge25519_has_small_order lists them (it compares the encoding with the sign bit cleared):
# 0 and 1, the two order-8 y values, p-1, and the non-canonical aliases p (= 0), p+1 (= 1).
_SMALL_ORDER_Y = (
    0,
    1,
    2707385501144840649318225287225658788936804267575313519463743609750303402022,
    55188659117513257062467267217118295137698188065244968500265048394206261417927,
    P - 1,
    P,
    P + 1,
)

# wNAF widths: B's table holds 2**(BASE_WINDOW-2) odd multiples, built once; each verified
# key gets 2**(KEY_WINDOW-2). See docs/ed25519.md for the measured trade-off and the RAM
# these cost on an ESP32.
BASE_WINDOW = const(7)
KEY_WINDOW = const(5)
# How many decoded keys (with their tables) verify() keeps. A board hears a few feeds.
KEY_CACHE_SIZE = 4

_NDIGITS = const(257)   # scalars < 2**256 give wNAF digits at positions 0..256


def _wnaf(k, w):
    """Width-w NAF of 0 <= k < 2**255 as a list of _NDIGITS small ints (index = bit).

    Every nonzero digit is odd with |digit| < 2**(w-1), and any w consecutive digits hold
    at most one nonzero. Reads bits from a byte string so the loop runs on small ints.
    """
    kb = k.to_bytes(35, "little")      # 2 spare bytes: a window read never runs off the end
    out = [0] * _NDIGITS
    mask = (1 << w) - 1
    carry = 0
    i = 0
    while i < _NDIGITS:
        j = i >> 3
        if ((kb[j] >> (i & 7)) & 1) == carry:
            i += 1
            continue
        word = (((kb[j] | (kb[j + 1] << 8) | (kb[j + 2] << 16)) >> (i & 7)) & mask) + carry
        carry = (word >> (w - 1)) & 1
        out[i] = word - (carry << w)
        i += w
    return out


def _add_niels(X, Y, Z, T, entry, neg):
    """(X:Y:Z:T) + the point of a projective Niels entry (Y+X, Y-X, 2d*T, 2Z), or minus
    it (neg), by add-2008-hwcd-3 (8M with T)."""
    p = P
    if neg:
        ymx, ypx, t2d, z2 = entry       # -(x, y) = (-x, y): swap Y+X and Y-X, negate 2dT
        cc = -(T * t2d % p)
    else:
        ypx, ymx, t2d, z2 = entry
        cc = T * t2d % p
    aa = (Y - X) * ymx % p
    bb = (Y + X) * ypx % p
    dd = Z * z2 % p
    e = bb - aa
    f = dd - cc
    g = dd + cc
    h = bb + aa
    return e * f % p, g * h % p, f * g % p, e * h % p


def _double_add(nb, na, tb, ta):
    """Return [nb]P + [na]Q in extended coordinates (X, Y, Z) (T dropped).

    nb, na are wNAF digit lists (na may be None for one point); tb, ta are P's and Q's
    tables of odd multiples (_key_table).
    """
    p = P
    i = _NDIGITS - 1
    while i >= 0 and not nb[i] and not (na is not None and na[i]):
        i -= 1
    top = i
    X = 0
    Y = 1
    Z = 1
    T = 0
    while i >= 0:
        db = nb[i]
        da = na[i] if na is not None else 0
        if i < top:
            # Doubling, dbl-2008-hwcd with a = -1 (signs of E, F, G, H folded in); T only
            # when an addition follows.
            a = X * X % p
            b = Y * Y % p
            c = Z * Z % p
            e = X + Y
            h = a + b
            e = h - e * e % p
            g = a - b
            f = g + c + c
            X = e * f % p
            Y = g * h % p
            Z = f * g % p
            if db or da:
                T = e * h % p
        if da:
            X, Y, Z, T = _add_niels(X, Y, Z, T, ta[abs(da) >> 1], da < 0)
        if db:
            X, Y, Z, T = _add_niels(X, Y, Z, T, tb[abs(db) >> 1], db < 0)
        i -= 1
    return X, Y, Z


def _encode(X, Y, Z):
    """Encode a projective point (RFC 8032 5.1.2): y little-endian, bit 255 = x's parity."""
    zi = pow(Z, P - 2, P)
    x = X * zi % P
    y = Y * zi % P
    return (y | ((x & 1) << 255)).to_bytes(32, "little")


def _decode_xy(s):
    """Decode a 32-byte point encoding to affine (x, y), or None (RFC 8032 5.1.3).

    Rejects y >= p and y with no square root for x. Like libsodium (and unlike RFC step 4)
    it accepts x = 0 with the sign bit set; the only such points have y = 1 or y = p-1,
    which verify() rejects earlier as small-order.
    """
    y = int.from_bytes(s, "little")
    sign = y >> 255
    y &= _MASK255
    if y >= P:
        return None
    yy = y * y % P
    u = (yy - 1) % P
    v = (D * yy + 1) % P
    v3 = v * v % P * v % P
    uv3 = u * v3 % P
    x = uv3 * pow(uv3 * v3 % P * v % P, _EXP_SQRT, P) % P
    vxx = v * x % P * x % P
    if vxx != u:
        if (vxx + u) % P:
            return None
        x = x * SQRT_M1 % P
    if (x & 1) != sign:
        x = (P - x) % P
    return x, y


def _key_table(x, y, n):
    """The n odd multiples Q, 3Q, ..., (2n-1)Q of the affine point Q = (x, y) in
    projective Niels form (Y+X, Y-X, 2d*T, 2Z), without any inversion."""
    p = P
    # 2Q (extended, with T), by the doubling formula above from Z = 1.
    a = x * x % p
    b = y * y % p
    h = a + b
    e = h - (x + y) * (x + y) % p
    g = a - b
    f = g + 2
    X2 = e * f % p
    Y2 = g * h % p
    Z2 = f * g % p
    T2 = e * h % p
    n2 = ((Y2 + X2) % p, (Y2 - X2) % p, T2 * D2 % p, Z2 * 2 % p)
    X = x
    Y = y
    Z = 1
    T = x * y % p
    tab = [((y + x) % p, (y - x) % p, T * D2 % p, 2)]
    for _ in range(n - 1):
        ypx, ymx, t2d, z2 = n2
        aa = (Y - X) * ymx % p
        bb = (Y + X) * ypx % p
        cc = T * t2d % p
        dd = Z * z2 % p
        e = bb - aa
        f = dd - cc
        g = dd + cc
        h = bb + aa
        X = e * f % p
        Y = g * h % p
        Z = f * g % p
        T = e * h % p
        tab.append(((Y + X) % p, (Y - X) % p, T * D2 % p, Z * 2 % p))
    return tab


_cache = {}         # public key -> its table (_neg_key_table)
_base = {}          # engine -> B's table


# The native engine (tinyssb/ed25519_viper.py) where MicroPython's viper emitter exists.
try:
    from tinyssb import ed25519_viper as _nat
    _nat.setup(D, D2, SQRT_M1)
    VIPER = True
except (ImportError, SyntaxError, NameError):
    VIPER = False

_viper = VIPER      # the engine in use (use_viper() switches, for tests and benchmarks)


def use_viper(on):
    """Verify and sign with the native engine (on, where it exists) or with the plain
    Python arithmetic; both give identical results. Clears the key cache, whose tables
    differ between the two. Returns whether the native engine is now in use."""
    global _viper
    _viper = bool(on) and VIPER
    _cache.clear()
    return _viper


def _clamp(h32):
    """RFC 8032 5.1.5 step 2: clear the low 3 bits and bit 255, set bit 254."""
    a = int.from_bytes(h32, "little")
    return (a & ((1 << 254) - 8)) | (1 << 254)


def _base_table():
    """B, 3B, ..., (2**(BASE_WINDOW-1) - 1)B for the engine in use, built on first use."""
    tab = _base.get(_viper)
    if tab is None:
        if _viper:
            tab = _nat.base_table(BX, BY, BASE_WINDOW)
        else:
            tab = _key_table(BX, BY, 1 << (BASE_WINDOW - 2))
        _base[_viper] = tab
    return tab


def _double_scalar(s, k, ta):
    """Encoding of [s]B + [k]Q for 0 <= s, k < L, Q's table ta (unused when k = 0)."""
    tb = _base_table()
    if _viper:
        return _nat.double_scalar(s, k, tb, ta or tb, BASE_WINDOW, KEY_WINDOW)
    X, Y, Z = _double_add(_wnaf(s, BASE_WINDOW), _wnaf(k, KEY_WINDOW) if k else None, tb, ta)
    return _encode(X, Y, Z)


def _base_mul(k):
    return _double_scalar(k % L, 0, None)


def _hash_int(*parts):
    h = _sha.new()
    for part in parts:
        h.update(part)
    return int.from_bytes(h.digest(), "little")


def publickey(seed):
    """Derive the public key of a 32-byte seed (RFC 8032 5.1.5).

    Args:
        seed: 32-byte secret seed.
    Returns:
        The 32-byte public key.
    Raises:
        ValueError: seed is not 32 bytes.
    """
    if len(seed) != 32:
        raise ValueError("ed25519 seed must be 32 bytes")
    return _base_mul(_clamp(_sha.sha512(bytes(seed))[:32]))


def sign(seed, msg, pub=None):
    """Sign `msg` with a 32-byte seed (RFC 8032 5.1.6).

    Args:
        seed: 32-byte secret seed.
        msg: bytes-like message.
        pub: the seed's public key if the caller has it (saves one scalar
            multiplication); it must be the right one or the signature will not verify.
    Returns:
        The 64-byte signature R || S.
    Raises:
        ValueError: seed or pub has the wrong length.
    """
    if len(seed) != 32:
        raise ValueError("ed25519 seed must be 32 bytes")
    if not isinstance(msg, bytes):
        msg = bytes(msg)
    hd = _sha.sha512(bytes(seed))
    a = _clamp(hd[:32]) % L
    if pub is None:
        pub = _base_mul(a)
    elif len(pub) != 32:
        raise ValueError("ed25519 public key must be 32 bytes")
    else:
        pub = bytes(pub)
    r = _hash_int(hd[32:], msg) % L
    R = _base_mul(r)
    k = _hash_int(R, pub, msg) % L
    s = (r + k * a) % L
    return R + s.to_bytes(32, "little")


def _neg_key_table(pub):
    """Table of -A for verify(), from the cache or freshly decoded; None if A is invalid."""
    tab = _cache.get(pub)
    if tab is not None:
        return tab
    y = int.from_bytes(pub, "little") & _MASK255
    if y >= P or y in _SMALL_ORDER_Y:
        return None
    if _viper:
        tab = _nat.neg_key_table(pub, KEY_WINDOW)
    else:
        xy = _decode_xy(pub)
        if xy is not None:
            tab = _key_table((P - xy[0]) % P, xy[1], 1 << (KEY_WINDOW - 2))   # -A = (-x, y)
    if tab is not None and KEY_CACHE_SIZE > 0:
        while len(_cache) >= KEY_CACHE_SIZE:
            _cache.pop(next(iter(_cache)))
        _cache[pub] = tab
    return tab


def verify(pub, msg, sig):
    """Check an Ed25519 signature with libsodium's acceptance rules (see module doc).

    Args:
        pub: 32-byte public key.
        msg: bytes-like message.
        sig: 64-byte signature.
    Returns:
        True if valid; False for a wrong signature and for any malformed input
        (wrong types or lengths, S >= L, small-order or undecodable points). Never raises.
    """
    try:
        if len(pub) != 32 or len(sig) != 64 or isinstance(msg, (int, str)):
            return False      # bytes(int) would make zeros, str is no message
        pub = bytes(pub)
        sig = bytes(sig)
        s = int.from_bytes(sig[32:], "little")
        if s >= L:
            return False
        if int.from_bytes(sig[:32], "little") & _MASK255 in _SMALL_ORDER_Y:
            return False
        ta = _neg_key_table(pub)
        if ta is None:
            return False
        k = _hash_int(sig[:32], pub, msg if isinstance(msg, bytes) else bytes(msg)) % L
        return _double_scalar(s, k, ta) == sig[:32]
    except Exception:
        return False


def clear_cache():
    """Forget the cached key tables (frees their RAM)."""
    _cache.clear()
