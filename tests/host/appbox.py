"""An independent implementation of the Android app's private-message box, for tests.

Written from the documented construction (../shared/reference/tinyssb-private-messages.md)
in plain Python: X25519 (RFC 7748), the Ed25519-to-Curve25519 maps, XSalsa20-Poly1305
(NaCl's secretbox) and the box layout

    nonce(24) || ephemeral curve25519 pk(32) || N x secretbox([N] || dek, nonce, k_i)
              || secretbox(plaintext, nonce, dek),   k_i = X25519(eph_sk, curve(pk_i))

It shares no code with tssb.chat.box (nor with libsodium), so a box one side seals and
the other opens checks both against the construction. Also: the app's BIPF integer
decoder (A/utils/Bipf.kt `_decode_body`, JVM Int arithmetic) to check what the app reads.
"""
import hashlib
import os

P = 2 ** 255 - 19
M32 = 0xFFFFFFFF


# -- X25519 and the Edwards/Montgomery maps ------------------------------------------------

def x25519(k, u):
    k = bytearray(k)
    k[0] &= 248
    k[31] &= 127
    k[31] |= 64
    k = int.from_bytes(k, "little")
    x1 = int.from_bytes(u, "little") & ((1 << 255) - 1)
    x2, z2, x3, z3, swap = 1, 0, x1, 1, 0
    for t in range(254, -1, -1):
        kt = (k >> t) & 1
        swap ^= kt
        if swap:
            x2, x3, z2, z3 = x3, x2, z3, z2
        swap = kt
        a, b = (x2 + z2) % P, (x2 - z2) % P
        aa, bb = a * a % P, b * b % P
        e = (aa - bb) % P
        c, d = (x3 + z3) % P, (x3 - z3) % P
        da, cb = d * a % P, c * b % P
        x3 = (da + cb) ** 2 % P
        z3 = x1 * (da - cb) ** 2 % P
        x2 = aa * bb % P
        z2 = e * (aa + 121665 * e) % P
    if swap:
        x2, z2 = x3, z3
    return (x2 * pow(z2, P - 2, P) % P).to_bytes(32, "little")


def curve_pk(ed_pk):
    """u = (1 + y) / (1 - y) of an Ed25519 public key."""
    y = int.from_bytes(ed_pk, "little") & ((1 << 255) - 1)
    return ((1 + y) * pow(1 - y, P - 2, P) % P).to_bytes(32, "little")


def curve_sk(seed):
    """The X25519 scalar of an Ed25519 seed: SHA-512(seed)[:32] (clamped when used)."""
    return hashlib.sha512(seed).digest()[:32]


def x25519_base(sk):
    return x25519(sk, (9).to_bytes(32, "little"))


# -- XSalsa20-Poly1305 ------------------------------------------------------------------

def _rotl(v, c):
    return ((v << c) & M32) | (v >> (32 - c))


def _rounds(x):
    for _ in range(10):
        for a, b, c, d in ((0, 4, 8, 12), (5, 9, 13, 1), (10, 14, 2, 6), (15, 3, 7, 11),
                           (0, 1, 2, 3), (5, 6, 7, 4), (10, 11, 8, 9), (15, 12, 13, 14)):
            x[b] ^= _rotl((x[a] + x[d]) & M32, 7)
            x[c] ^= _rotl((x[b] + x[a]) & M32, 9)
            x[d] ^= _rotl((x[c] + x[b]) & M32, 13)
            x[a] ^= _rotl((x[d] + x[c]) & M32, 18)
    return x


_SIGMA = [0x61707865, 0x3320646E, 0x79622D32, 0x6B206574]


def _words(b):
    return [int.from_bytes(b[i:i + 4], "little") for i in range(0, len(b), 4)]


def _state(key, inp16):
    k, n = _words(key), _words(inp16)
    return [_SIGMA[0], k[0], k[1], k[2], k[3], _SIGMA[1], n[0], n[1], n[2], n[3],
            _SIGMA[2], k[4], k[5], k[6], k[7], _SIGMA[3]]


def _hsalsa(key, inp16):
    x = _rounds(_state(key, inp16))
    return b"".join(x[i].to_bytes(4, "little") for i in (0, 5, 10, 15, 6, 7, 8, 9))


def _stream(key, nonce24, n):
    sub = _hsalsa(key, nonce24[:16])
    out = bytearray()
    block = 0
    while len(out) < n:
        s = _state(sub, nonce24[16:24] + block.to_bytes(8, "little"))
        x = _rounds(list(s))
        out += b"".join(((x[i] + s[i]) & M32).to_bytes(4, "little") for i in range(16))
        block += 1
    return bytes(out[:n])


def _poly1305(key, msg):
    r = int.from_bytes(key[:16], "little") & 0x0FFFFFFC0FFFFFFC0FFFFFFC0FFFFFFF
    s = int.from_bytes(key[16:32], "little")
    p, acc = (1 << 130) - 5, 0
    for i in range(0, len(msg), 16):
        acc = (acc + int.from_bytes(msg[i:i + 16] + b"\x01", "little")) * r % p
    return ((acc + s) % (1 << 128)).to_bytes(16, "little")


def secretbox(msg, nonce, key):
    ks = _stream(key, nonce, 32 + len(msg))
    c = bytes(a ^ b for a, b in zip(msg, ks[32:]))
    return _poly1305(ks[:32], c) + c


def secretbox_open(boxed, nonce, key):
    """The plaintext, or None when the MAC does not match."""
    if len(boxed) < 16:
        raise ValueError("shorter than a MAC")   # what the app's decrypt does
    ks = _stream(key, nonce, 32 + len(boxed) - 16)
    if _poly1305(ks[:32], boxed[16:]) != boxed[:16]:
        return None
    return bytes(a ^ b for a, b in zip(boxed[16:], ks[32:]))


# -- the app's box -------------------------------------------------------------------------

def seal(plain, ed_pks, urandom=os.urandom):
    """Box as the app does, for any number of recipients (the app does not limit it)."""
    nonce, dek, eph_seed = urandom(24), urandom(32), urandom(32)
    eph = curve_sk(eph_seed)
    cdek = bytes([len(ed_pks) & 0xFF]) + dek
    slots = b"".join(secretbox(cdek, nonce, x25519(eph, curve_pk(pk))) for pk in ed_pks)
    return nonce + x25519_base(eph) + slots + secretbox(plain, nonce, dek)


def open_box(raw, seed):
    """As the app's decryptPrivateMessage (A/crypto/SSBid.kt:115-134): slots 0..6, the
    count from the slot; None if no slot opens. Raises ValueError where the app throws: a
    box shorter than its nonce and key (:117, :118), a count byte read as a negative JVM
    byte that puts the body before the start (:128), a body shorter than a MAC
    (SodiumAPI.kt:49)."""
    if len(raw) < 56:
        raise ValueError("SSBid.kt:%d: a box of %d bytes" % (117 if len(raw) < 24 else 118,
                                                            len(raw)))
    nonce, eph = raw[:24], raw[24:56]
    kek = x25519(curve_sk(seed), eph)
    for i in range(7):
        slot = raw[56 + 49 * i:56 + 49 * (i + 1)]
        if len(slot) < 49:
            return None
        cdek = secretbox_open(slot, nonce, kek)
        if cdek is not None:
            n = cdek[0] if cdek[0] < 128 else cdek[0] - 256    # a JVM byte
            if 56 + 49 * n < 0:
                raise ValueError("SSBid.kt:128: count byte %d" % cdek[0])
            return secretbox_open(raw[56 + 49 * n:], nonce, cdek[1:])
    return None


# -- the app's BIPF integer decoder (Kotlin on the JVM) --------------------------------

def _shl32(v, n):
    """Kotlin Int `v shl n`: the count masked to 5 bits, the result a 32-bit Int."""
    r = (v << (n & 31)) & M32
    return r - (1 << 32) if r & 0x80000000 else r


def kotlin_int(body):
    """What Bipf.kt's _decode_body reads from an INT body."""
    v, i = 0, 0
    for b in body:
        v = v | _shl32(b, i)
        i += 8
    m = _shl32(1, i + 7)
    if v & m == 0:
        return v
    r = (v - _shl32(m, 1)) & M32
    return r - (1 << 32) if r & 0x80000000 else r


def kotlin_body(v):
    """Bipf.kt's INT encoder: magnitude bytes, no sign bit (negatives lose their sign)."""
    if v < 0:
        v = -v - 1
    out = bytearray([v & 0xFF])
    v >>= 8
    while v > 0:
        out.append(v & 0xFF)
        v >>= 8
    return bytes(out)
