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


# --- The native engine (MicroPython's viper emitter) -------------------------------------
#
# Field elements are 20 limbs of 13 bits (260 bits) in 32-bit words, so every limb product
# (< 2^26) and every column of a product (20 of them, < 2^30.4) fits a signed 32-bit word:
# the ESP32's viper ints are 32 bits, the unix port's 64, and staying below 2^31 makes both
# compute the same words. Elements live in numbered slots of one workspace; the point
# formulas are short programs of (op, dst, x, y) bytes that one viper function runs, so a
# doubling is one call into native code instead of ~20 big-int operations, each of which
# allocates. Every op leaves its result loosely reduced: limbs < 2^13 except limb 2
# (< 2^13 + 4) and limb 19 (< 2^8), so the value is < 2^255 + 2^28. The bound analysis is
# in docs/ed25519.md; tests/core/test_ed25519.py runs long op chains against Python ints.
# The workspace and buffers are module state: one operation at a time, as MicroPython
# runs them (no thread or scheduled callback may call in meanwhile).
try:
    import micropython

    # Workspace slots (80 bytes each) and scratch behind them.
    _ZERO = const(0)      # constants, loaded at import
    _ONE = const(1)
    _DC = const(2)        # d
    _D2C = const(3)       # 2d
    _IC = const(4)        # sqrt(-1)
    _X = const(5)         # the accumulated point (X:Y:Z:T)
    _Y = const(6)
    _Z = const(7)
    _T = const(8)
    _N0 = const(9)        # the table entry being added: Y+X, Y-X, 2dT, 2Z
    _N1 = const(10)
    _N2 = const(11)
    _N3 = const(12)
    _A = const(13)        # formula temporaries
    _B = const(14)
    _C = const(15)
    _DD = const(16)
    _E = const(17)
    _F = const(18)
    _G = const(19)
    _H = const(20)
    _T0 = const(21)       # exponentiation chain
    _T1 = const(22)
    _T2 = const(23)
    _T3 = const(24)
    _U = const(13)        # point decoding (uses no _A, no _DD)
    _V = const(16)
    _QX = const(21)       # the point a table is built from (no chain meanwhile)
    _QY = const(22)
    _QT = const(23)
    _NSLOT = const(25)
    # Scratch after the slots: the 40-column product (kept zero between ops), a square's
    # doubled operand (20 words) and _fe_store's 40 words.
    _SCR = const(80 * _NSLOT)
    _WORKSPACE = const(80 * _NSLOT + 400)

    _MUL = const(0)       # dst = x * y
    _SQR = const(1)       # dst = x ** (2 ** y): y squarings in a row
    _ADD = const(2)       # dst = x + y
    _SUB = const(3)       # dst = x - y
    _END = const(255)

    @micropython.viper
    def _fe_vm(a: ptr32, b: ptr32, t: ptr32, prog: ptr8, pc: int):
        """Run the program at prog[pc:] (4 bytes an op, ends with _END) on the workspace.

        Call as _fe_vm(ws, ws, ws, prog, pc): a, b and t are the three locals the native
        emitter keeps in registers, which the product loop below needs for its operands.
        """
        w = uint(a)
        s = w + _SCR
        while True:
            op = prog[pc]
            if op == _END:
                break
            r = ptr32(w + 80 * prog[pc + 1])
            xa = w + 80 * prog[pc + 2]
            ya = w + 80 * prog[pc + 3]
            reps = 1
            if op == _SQR:
                reps = prog[pc + 3]
                ya = xa
            pc += 4
            while True:
                if op == _ADD:
                    a = ptr32(xa)
                    b = ptr32(ya)
                    c = 0
                    k = 0
                    while k < 20:
                        c += a[k] + b[k]
                        r[k] = c & 0x1FFF
                        c = c >> 13
                        k += 1
                elif op == _SUB:
                    # x - y + 2p, with 2p written as limbs (16346, 16382, ..., 16382, 510)
                    # that are each above y's limb bound, so no limb goes negative.
                    a = ptr32(xa)
                    b = ptr32(ya)
                    c = a[0] + 16346 - b[0]
                    r[0] = c & 0x1FFF
                    c = c >> 13
                    k = 1
                    while k < 19:
                        c += a[k] + 16382 - b[k]
                        r[k] = c & 0x1FFF
                        c = c >> 13
                        k += 1
                    c += a[19] + 510 - b[19]
                    r[19] = c & 0x1FFF
                    c = c >> 13
                else:
                    # Schoolbook product in 10x10 blocks, each written out so a, b and t
                    # stay in registers: four blocks, or for a square the two diagonal
                    # ones (cross terms once, against the doubled operand) and one cross
                    # block against the doubled operand.
                    if op == _SQR:
                        a = ptr32(xa)
                        t = ptr32(s + 160)
                        k = 0
                        while k < 20:
                            t[k] = a[k] << 1
                            k += 1
                    blk = 0
                    while blk < 4:
                        i = (blk >> 1) * 10
                        j = (blk & 1) * 10
                        a = ptr32(xa + 4 * i)
                        t = ptr32(s + 4 * (i + j))
                        if op == _SQR:
                            b = ptr32(s + 160 + 4 * j)
                        else:
                            b = ptr32(ya + 4 * j)
                        if op == _SQR and i == j:
                            t[0] += a[0] * a[0]
                            t[1] += b[0] * a[1]
                            t[2] += b[0] * a[2] + a[1] * a[1]
                            t[3] += b[0] * a[3] + b[1] * a[2]
                            t[4] += b[0] * a[4] + b[1] * a[3] + a[2] * a[2]
                            t[5] += b[0] * a[5] + b[1] * a[4] + b[2] * a[3]
                            t[6] += b[0] * a[6] + b[1] * a[5] + b[2] * a[4] + a[3] * a[3]
                            t[7] += b[0] * a[7] + b[1] * a[6] + b[2] * a[5] + b[3] * a[4]
                            t[8] += (b[0] * a[8] + b[1] * a[7] + b[2] * a[6] + b[3] * a[5]
                                     + a[4] * a[4])
                            t[9] += (b[0] * a[9] + b[1] * a[8] + b[2] * a[7] + b[3] * a[6]
                                     + b[4] * a[5])
                            t[10] += (b[1] * a[9] + b[2] * a[8] + b[3] * a[7] + b[4] * a[6]
                                      + a[5] * a[5])
                            t[11] += b[2] * a[9] + b[3] * a[8] + b[4] * a[7] + b[5] * a[6]
                            t[12] += b[3] * a[9] + b[4] * a[8] + b[5] * a[7] + a[6] * a[6]
                            t[13] += b[4] * a[9] + b[5] * a[8] + b[6] * a[7]
                            t[14] += b[5] * a[9] + b[6] * a[8] + a[7] * a[7]
                            t[15] += b[6] * a[9] + b[7] * a[8]
                            t[16] += b[7] * a[9] + a[8] * a[8]
                            t[17] += b[8] * a[9]
                            t[18] += a[9] * a[9]
                        else:
                            t[0] += a[0] * b[0]
                            t[1] += a[0] * b[1] + a[1] * b[0]
                            t[2] += a[0] * b[2] + a[1] * b[1] + a[2] * b[0]
                            t[3] += a[0] * b[3] + a[1] * b[2] + a[2] * b[1] + a[3] * b[0]
                            t[4] += (a[0] * b[4] + a[1] * b[3] + a[2] * b[2] + a[3] * b[1]
                                     + a[4] * b[0])
                            t[5] += (a[0] * b[5] + a[1] * b[4] + a[2] * b[3] + a[3] * b[2]
                                     + a[4] * b[1] + a[5] * b[0])
                            t[6] += (a[0] * b[6] + a[1] * b[5] + a[2] * b[4] + a[3] * b[3]
                                     + a[4] * b[2] + a[5] * b[1] + a[6] * b[0])
                            t[7] += (a[0] * b[7] + a[1] * b[6] + a[2] * b[5] + a[3] * b[4]
                                     + a[4] * b[3] + a[5] * b[2] + a[6] * b[1] + a[7] * b[0])
                            t[8] += (a[0] * b[8] + a[1] * b[7] + a[2] * b[6] + a[3] * b[5]
                                     + a[4] * b[4] + a[5] * b[3] + a[6] * b[2] + a[7] * b[1]
                                     + a[8] * b[0])
                            t[9] += (a[0] * b[9] + a[1] * b[8] + a[2] * b[7] + a[3] * b[6]
                                     + a[4] * b[5] + a[5] * b[4] + a[6] * b[3] + a[7] * b[2]
                                     + a[8] * b[1] + a[9] * b[0])
                            t[10] += (a[1] * b[9] + a[2] * b[8] + a[3] * b[7] + a[4] * b[6]
                                      + a[5] * b[5] + a[6] * b[4] + a[7] * b[3]
                                      + a[8] * b[2] + a[9] * b[1])
                            t[11] += (a[2] * b[9] + a[3] * b[8] + a[4] * b[7] + a[5] * b[6]
                                      + a[6] * b[5] + a[7] * b[4] + a[8] * b[3]
                                      + a[9] * b[2])
                            t[12] += (a[3] * b[9] + a[4] * b[8] + a[5] * b[7] + a[6] * b[6]
                                      + a[7] * b[5] + a[8] * b[4] + a[9] * b[3])
                            t[13] += (a[4] * b[9] + a[5] * b[8] + a[6] * b[7] + a[7] * b[6]
                                      + a[8] * b[5] + a[9] * b[4])
                            t[14] += (a[5] * b[9] + a[6] * b[8] + a[7] * b[7] + a[8] * b[6]
                                      + a[9] * b[5])
                            t[15] += a[6] * b[9] + a[7] * b[8] + a[8] * b[7] + a[9] * b[6]
                            t[16] += a[7] * b[9] + a[8] * b[8] + a[9] * b[7]
                            t[17] += a[8] * b[9] + a[9] * b[8]
                            t[18] += a[9] * b[9]
                        blk += 1
                        if op == _SQR and blk == 2:
                            blk = 3
                    # Carry the high 20 columns into 13-bit limbs (they hold < 2^252), then
                    # fold them down as 2^260 = 608 (mod p), leaving t zero for the next op.
                    t = ptr32(s)
                    c = 0
                    k = 20
                    while k < 40:
                        c += t[k]
                        t[k] = c & 0x1FFF
                        c = c >> 13
                        k += 1
                    c = 0
                    k = 0
                    while k < 20:
                        c += t[k] + 608 * t[k + 20]
                        t[k] = 0
                        t[k + 20] = 0
                        r[k] = c & 0x1FFF
                        c = c >> 13
                        k += 1
                # Bits 255 and up (limb 19's top 5 bits and the carry) fold back as
                # 2^255 = 19 (mod p) into limb 0, carried into limbs 1 and 2.
                c = (r[19] >> 8) + (c << 5)
                r[19] = r[19] & 0xFF
                c = r[0] + 19 * c
                r[0] = c & 0x1FFF
                c = r[1] + (c >> 13)
                r[1] = c & 0x1FFF
                r[2] = r[2] + (c >> 13)
                reps -= 1
                if reps <= 0:
                    break
                xa = uint(r)
                ya = xa

    @micropython.viper
    def _fe_load(w: ptr32, slot: int, src: ptr8, off: int, n: int):
        """Slots slot..slot+n-1 = the n 32-byte little-endian numbers at src[off:], each
        with bit 255 ignored."""
        while n > 0:
            r = ptr32(uint(w) + 80 * slot)
            acc = 0
            nb = 0
            j = 0
            k = 0
            while k < 20:
                while nb < 13 and j < 32:
                    acc |= src[off + j] << nb
                    j += 1
                    nb += 8
                r[k] = acc & 0x1FFF
                acc = acc >> 13
                nb -= 13
                k += 1
            r[19] = r[19] & 0xFF
            slot += 1
            off += 32
            n -= 1

    @micropython.viper
    def _fe_store(w: ptr32, slot: int, dst: ptr8, off: int):
        """dst[off:off + 32] = the canonical little-endian encoding of the slot (mod p)."""
        r = ptr32(uint(w) + 80 * slot)
        t = ptr32(uint(w) + _SCR + 240)
        # The slot holds x < 2^255 + 2^28 (every op's output bound), so x mod p is x or
        # x - p, and x >= p exactly when x + 19 >= 2^255: carry x and x + 19 into limbs
        # side by side, and take x + 19 without bit 255 if that bit is set.
        c = 0
        d = 19
        k = 0
        while k < 20:
            c += r[k]
            d += r[k]
            t[k] = c & 0x1FFF
            t[20 + k] = d & 0x1FFF
            c = c >> 13
            d = d >> 13
            k += 1
        if t[39] >> 8:
            t[39] = t[39] & 0xFF
            t = ptr32(uint(t) + 80)
        acc = 0
        nb = 0
        j = 0
        k = 0
        while k < 20:
            acc |= t[k] << nb
            nb += 13
            while nb >= 8 and j < 32:
                dst[off + j] = acc & 0xFF
                acc = acc >> 8
                nb -= 8
                j += 1
            k += 1

    @micropython.viper
    def _wnaf_v(out: ptr8, kb: ptr8, w: int) -> int:
        """_wnaf() into out[0.._NDIGITS-1] as signed bytes, from the scalar's 32
        little-endian bytes in kb (plus 3 zero bytes); returns the top nonzero digit's
        index, or -1 for zero."""
        i = 0
        while i < _NDIGITS:
            out[i] = 0
            i += 1
        mask = (1 << w) - 1
        carry = 0
        top = -1
        i = 0
        while i < _NDIGITS:
            j = i >> 3
            if ((kb[j] >> (i & 7)) & 1) == carry:
                i += 1
                continue
            word = (((kb[j] | (kb[j + 1] << 8) | (kb[j + 2] << 16)) >> (i & 7)) & mask) + carry
            carry = (word >> (w - 1)) & 1
            out[i] = (word - (carry << w)) & 0xFF
            top = i
            i += w
        return top

    @micropython.viper
    def _straus_v(ws, nb: ptr8, na: ptr8, tb: ptr8, ta: ptr8, top: int):
        """_double_add() from digit `top` down on the workspace's point (X:Y:Z:T), with
        the tables of _v_table()."""
        progs = _PROGS
        i = top
        while i >= 0:
            db = int(nb[i])
            da = int(na[i])
            if db > 127:
                db -= 256
            if da > 127:
                da -= 256
            if i < top:
                if da or db:
                    _fe_vm(ws, ws, ws, progs, _P_DBL_T)
                else:
                    _fe_vm(ws, ws, ws, progs, _P_DBL)
            if da:
                _fe_load(ws, _N0, ta, 128 * ((da if da > 0 else 0 - da) >> 1), 4)
                if da > 0:
                    _fe_vm(ws, ws, ws, progs, _P_ADD_T if db else _P_ADD)
                else:
                    _fe_vm(ws, ws, ws, progs, _P_SUB_T if db else _P_SUB)
            if db:
                _fe_load(ws, _N0, tb, 128 * ((db if db > 0 else 0 - db) >> 1), 4)
                _fe_vm(ws, ws, ws, progs, _P_ADD if db > 0 else _P_SUB)
            i -= 1

    _progs = bytearray()

    def _prog(ops):
        """Append a program to _progs; return its offset."""
        off = len(_progs)
        for op in ops:
            _progs.extend(bytes(op))
        _progs.append(_END)
        return off

    # Doubling, dbl-2008-hwcd with a = -1 as in _double_add() (T only when an addition
    # follows).
    _DBL = ((_SQR, _A, _X, 1), (_SQR, _B, _Y, 1), (_SQR, _C, _Z, 1), (_ADD, _E, _X, _Y),
            (_SQR, _E, _E, 1), (_ADD, _H, _A, _B), (_SUB, _E, _H, _E), (_SUB, _G, _A, _B),
            (_ADD, _F, _G, _C), (_ADD, _F, _F, _C),
            (_MUL, _X, _E, _F), (_MUL, _Y, _G, _H), (_MUL, _Z, _F, _G))
    _TOUT = ((_MUL, _T, _E, _H),)

    def _add_ops(neg):
        """_add_niels() of the entry in N0..N3, or of its negative (neg)."""
        ypx, ymx = (_N1, _N0) if neg else (_N0, _N1)
        f, g = (_ADD, _SUB) if neg else (_SUB, _ADD)
        return ((_SUB, _A, _Y, _X), (_MUL, _A, _A, ymx), (_ADD, _B, _Y, _X),
                (_MUL, _B, _B, ypx), (_MUL, _C, _T, _N2), (_MUL, _DD, _Z, _N3),
                (_SUB, _E, _B, _A), (_ADD, _H, _B, _A), (f, _F, _DD, _C), (g, _G, _DD, _C),
                (_MUL, _X, _E, _F), (_MUL, _Y, _G, _H), (_MUL, _Z, _F, _G))

    def _chain(z):
        """T1 = z^(2^250 - 1), T0 = z^11: the shared start of z^(p-2) and z^((p-5)/8)."""
        return ((_SQR, _T0, z, 1), (_SQR, _T1, _T0, 2), (_MUL, _T1, z, _T1),
                (_MUL, _T0, _T0, _T1), (_SQR, _T2, _T0, 1), (_MUL, _T1, _T1, _T2),
                (_SQR, _T2, _T1, 5), (_MUL, _T1, _T2, _T1), (_SQR, _T2, _T1, 10),
                (_MUL, _T2, _T2, _T1), (_SQR, _T3, _T2, 20), (_MUL, _T2, _T3, _T2),
                (_SQR, _T2, _T2, 10), (_MUL, _T1, _T2, _T1), (_SQR, _T2, _T1, 50),
                (_MUL, _T2, _T2, _T1), (_SQR, _T3, _T2, 100), (_MUL, _T2, _T3, _T2),
                (_SQR, _T2, _T2, 50), (_MUL, _T1, _T2, _T1))

    _P_DBL = _prog(_DBL)
    _P_DBL_T = _prog(_DBL + _TOUT)
    _P_ADD = _prog(_add_ops(False))
    _P_ADD_T = _prog(_add_ops(False) + _TOUT)
    _P_SUB = _prog(_add_ops(True))
    _P_SUB_T = _prog(_add_ops(True) + _TOUT)
    _P_IDENTITY = _prog(((_ADD, _X, _ZERO, _ZERO), (_ADD, _Y, _ONE, _ZERO),
                         (_ADD, _Z, _ONE, _ZERO), (_ADD, _T, _ZERO, _ZERO)))
    # (X, Y) = (X/Z, Y/Z), Z^-1 = Z^(p-2) = (Z^(2^250-1))^(2^5) * Z^11.
    _P_AFFINE = _prog(_chain(_Z) + ((_SQR, _T1, _T1, 5), (_MUL, _T1, _T1, _T0),
                                    (_MUL, _X, _X, _T1), (_MUL, _Y, _Y, _T1)))
    # RFC 8032 5.1.3 for y in Y: U = y^2 - 1, V = d y^2 + 1, X = U V^3 (U V^7)^((p-5)/8),
    # then H = V X^2 (a root if H = U) and F = H + U (a root times sqrt(-1) if F = 0).
    _P_DECODE = _prog(((_SQR, _B, _Y, 1), (_SUB, _U, _B, _ONE), (_MUL, _V, _B, _DC),
                       (_ADD, _V, _V, _ONE), (_SQR, _C, _V, 1), (_MUL, _C, _C, _V),
                       (_MUL, _E, _U, _C), (_SQR, _F, _C, 1), (_MUL, _F, _F, _V),
                       (_MUL, _F, _F, _U)) + _chain(_F)
                      + ((_SQR, _T1, _T1, 2), (_MUL, _T1, _T1, _F), (_MUL, _X, _E, _T1),
                         (_SQR, _H, _X, 1), (_MUL, _H, _H, _V), (_ADD, _F, _H, _U)))
    _P_TIMES_I = _prog(((_MUL, _X, _X, _IC),))
    _P_NEG_X = _prog(((_SUB, _X, _ZERO, _X),))
    # Table building from the affine point in (X, Y): save it with Z = 1 and T = XY.
    _P_START = _prog(((_ADD, _Z, _ONE, _ZERO), (_MUL, _T, _X, _Y), (_ADD, _QX, _X, _ZERO),
                      (_ADD, _QY, _Y, _ZERO), (_ADD, _QT, _T, _ZERO)))
    _P_RESTORE = _prog(((_ADD, _X, _QX, _ZERO), (_ADD, _Y, _QY, _ZERO),
                        (_ADD, _Z, _ONE, _ZERO), (_ADD, _T, _QT, _ZERO)))
    # Projective Niels form (Y+X, Y-X, 2dT, 2Z) of the point, into E..H or into N0..N3.
    _P_NIELS = _prog(((_ADD, _E, _Y, _X), (_SUB, _F, _Y, _X), (_MUL, _G, _T, _D2C),
                      (_ADD, _H, _Z, _Z)))
    _P_NIELS_N = _prog(((_ADD, _N0, _Y, _X), (_SUB, _N1, _Y, _X), (_MUL, _N2, _T, _D2C),
                        (_ADD, _N3, _Z, _Z)))
    _PROGS = bytes(_progs)
    del _progs

    _W = bytearray(_WORKSPACE)
    for _slot, _v in ((_ONE, 1), (_DC, D), (_D2C, D2), (_IC, SQRT_M1)):
        _fe_load(_W, _slot, _v.to_bytes(32, "little"), 0, 1)
    del _slot, _v
    _DA = bytearray(_NDIGITS)     # wNAF digits of the two scalars
    _DB = bytearray(_NDIGITS)
    _KB = bytearray(35)           # a scalar's bytes for _wnaf_v
    _FB = bytearray(32)           # a field element's bytes

    def _v_run(off):
        _fe_vm(_W, _W, _W, _PROGS, off)

    def _v_encode():
        """Encode the workspace's point (X:Y:Z) (RFC 8032 5.1.2)."""
        _v_run(_P_AFFINE)
        out = bytearray(32)
        _fe_store(_W, _Y, out, 0)
        _fe_store(_W, _X, _FB, 0)
        out[31] |= (_FB[0] & 1) << 7
        return bytes(out)

    def _v_table(n):
        """_key_table() of the affine point in slots (X, Y), as 128 bytes an entry (four
        canonical field elements)."""
        tab = bytearray(128 * n)
        _v_run(_P_START)
        for i in range(n):
            if i == 1:
                _v_run(_P_DBL_T)            # 2Q, kept in N0..N3 while Q, 3Q, ... are made
                _v_run(_P_NIELS_N)
                _v_run(_P_RESTORE)
            if i:
                _v_run(_P_ADD_T)
            _v_run(_P_NIELS)
            for j in range(4):
                _fe_store(_W, _E + j, tab, 128 * i + 32 * j)
        return tab

    def _v_neg_key_table(pub):
        """_v_table() of -A for the key `pub` (y < p, not small order), or None if A is
        not on the curve."""
        _fe_load(_W, _Y, pub, 0, 1)
        _v_run(_P_DECODE)
        _fe_store(_W, _H, _FB, 0)
        u = bytearray(32)
        _fe_store(_W, _U, u, 0)
        if _FB != u:
            _fe_store(_W, _F, _FB, 0)
            if any(_FB):
                return None                 # u/v has no square root: not a point
            _v_run(_P_TIMES_I)
        _fe_store(_W, _X, _FB, 0)
        if (_FB[0] & 1) == pub[31] >> 7:
            _v_run(_P_NEG_X)                # this root is A's x: -A has the other one
        return _v_table(1 << (KEY_WINDOW - 2))

    def _v_base_table():
        _fe_load(_W, _X, BX.to_bytes(32, "little"), 0, 1)
        _fe_load(_W, _Y, BY.to_bytes(32, "little"), 0, 1)
        return _v_table(1 << (BASE_WINDOW - 2))

    def _v_double_scalar(s, k, tb, ta):
        """Encoding of [s]P + [k]Q for the tables tb of P and ta of Q (unused if k = 0)."""
        _KB[:32] = s.to_bytes(32, "little")
        top = _wnaf_v(_DB, _KB, BASE_WINDOW)
        _KB[:32] = k.to_bytes(32, "little")
        top = max(top, _wnaf_v(_DA, _KB, KEY_WINDOW))
        _v_run(_P_IDENTITY)
        _straus_v(_W, _DB, _DA, tb, ta, top)
        return _v_encode()

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
            tab = _v_base_table()
        else:
            tab = _key_table(BX, BY, 1 << (BASE_WINDOW - 2))
        _base[_viper] = tab
    return tab


def _double_scalar(s, k, ta):
    """Encoding of [s]B + [k]Q for 0 <= s, k < L, Q's table ta (unused when k = 0)."""
    tb = _base_table()
    if _viper:
        return _v_double_scalar(s, k, tb, ta or tb)
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
        tab = _v_neg_key_table(pub)
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
