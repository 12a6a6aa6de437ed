"""The native Ed25519 engine for boards: field arithmetic over 13-bit limbs in
MicroPython's viper emitter. tinyssb.ed25519 uses it where it compiles (it owns the curve
constants: setup()); its plain-Python engine gives identical results.

Field elements are 20 limbs of 13 bits (260 bits) in 32-bit words, so every limb product
(< 2^26) and every column of a product (20 of them, < 2^30.4) fits a signed 32-bit word:
the ESP32's viper ints are 32 bits, the unix port's 64, and staying below 2^31 makes both
compute the same words. Elements live in numbered slots of one workspace; the point
formulas are short programs of (op, dst, x, y) bytes that one viper function runs, so a
doubling is one call into native code instead of ~20 big-int operations, each of which
allocates. Every op leaves its result loosely reduced: limbs < 2^13 except limb 2
(< 2^13 + 4) and limb 19 (< 2^8), so the value is < 2^255 + 2^28. The bound analysis is
in docs/ed25519.md; tests/core/test_ed25519.py runs long op chains against Python ints.
The workspace and buffers are module state: one operation at a time, as MicroPython
runs them (no thread or scheduled callback may call in meanwhile).
"""
import micropython
from micropython import const

_NDIGITS = const(257)   # wNAF digits of a scalar < 2**256 (as in tinyssb.ed25519)

# Workspace slots (80 bytes each) and scratch behind them.
_ZERO = const(0)      # constants, loaded by setup()
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
_DA = bytearray(_NDIGITS)     # wNAF digits of the two scalars
_DB = bytearray(_NDIGITS)
_KB = bytearray(35)           # a scalar's bytes for _wnaf_v
_FB = bytearray(32)           # a field element's bytes

def setup(d, d2, sqrt_m1):
    """Load the curve constants d, 2d and sqrt(-1) into the workspace (once, by their
    owner tinyssb.ed25519)."""
    _fe_load(_W, _ONE, b"\x01" + bytes(31), 0, 1)
    for slot, v in ((_DC, d), (_D2C, d2), (_IC, sqrt_m1)):
        _fe_load(_W, slot, v.to_bytes(32, "little"), 0, 1)


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

def neg_key_table(pub, window):
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
    return _v_table(1 << (window - 2))

def base_table(bx, by, window):
    """_v_table() of the point (bx, by): 2**(window-2) entries."""
    _fe_load(_W, _X, bx.to_bytes(32, "little"), 0, 1)
    _fe_load(_W, _Y, by.to_bytes(32, "little"), 0, 1)
    return _v_table(1 << (window - 2))

def double_scalar(s, k, tb, ta, wb, wa):
    """Encoding of [s]P + [k]Q for the tables tb of P and ta of Q (unused if k = 0), of
    windows wb and wa."""
    _KB[:32] = s.to_bytes(32, "little")
    top = _wnaf_v(_DB, _KB, wb)
    _KB[:32] = k.to_bytes(32, "little")
    top = max(top, _wnaf_v(_DA, _KB, wa))
    _v_run(_P_IDENTITY)
    _straus_v(_W, _DB, _DA, tb, ta, top)
    return _v_encode()
