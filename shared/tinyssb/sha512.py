"""SHA-512 (FIPS 180-4) in pure Python, for ports whose hashlib lacks it.

MicroPython's hashlib has sha256 but no sha512, and Ed25519 (RFC 8032) hashes with
SHA-512. `new()` returns hashlib's object where it exists (CPython: C speed) and the pure
`SHA512` below elsewhere; both offer update() / digest() / hexdigest() / copy().

The pure compression runs in one of two forms, with identical results (tests compare them):
a viper function on MicroPython (64-bit words as two 32-bit halves, sums carried through
16-bit quarters so the ESP32's 32-bit and the unix port's 64-bit machine words agree), and
plain Python on 64-bit words as ints (arbitrary precision on every port), masking after
each addition and rotation. The hash state is the 64-byte big-endian digest so far.
"""

_M = 0xFFFFFFFFFFFFFFFF
BLOCK_SIZE = 128    # FIPS 180-4 section 1: 1024-bit blocks
DIGEST_SIZE = 64

# FIPS 180-4 section 4.2.3: first 64 bits of the fractional parts of the cube roots of
# the first eighty primes.
_K = (
    0x428a2f98d728ae22, 0x7137449123ef65cd, 0xb5c0fbcfec4d3b2f, 0xe9b5dba58189dbbc,
    0x3956c25bf348b538, 0x59f111f1b605d019, 0x923f82a4af194f9b, 0xab1c5ed5da6d8118,
    0xd807aa98a3030242, 0x12835b0145706fbe, 0x243185be4ee4b28c, 0x550c7dc3d5ffb4e2,
    0x72be5d74f27b896f, 0x80deb1fe3b1696b1, 0x9bdc06a725c71235, 0xc19bf174cf692694,
    0xe49b69c19ef14ad2, 0xefbe4786384f25e3, 0x0fc19dc68b8cd5b5, 0x240ca1cc77ac9c65,
    0x2de92c6f592b0275, 0x4a7484aa6ea6e483, 0x5cb0a9dcbd41fbd4, 0x76f988da831153b5,
    0x983e5152ee66dfab, 0xa831c66d2db43210, 0xb00327c898fb213f, 0xbf597fc7beef0ee4,
    0xc6e00bf33da88fc2, 0xd5a79147930aa725, 0x06ca6351e003826f, 0x142929670a0e6e70,
    0x27b70a8546d22ffc, 0x2e1b21385c26c926, 0x4d2c6dfc5ac42aed, 0x53380d139d95b3df,
    0x650a73548baf63de, 0x766a0abb3c77b2a8, 0x81c2c92e47edaee6, 0x92722c851482353b,
    0xa2bfe8a14cf10364, 0xa81a664bbc423001, 0xc24b8b70d0f89791, 0xc76c51a30654be30,
    0xd192e819d6ef5218, 0xd69906245565a910, 0xf40e35855771202a, 0x106aa07032bbd1b8,
    0x19a4c116b8d2d0c8, 0x1e376c085141ab53, 0x2748774cdf8eeb99, 0x34b0bcb5e19b48a8,
    0x391c0cb3c5c95a63, 0x4ed8aa4ae3418acb, 0x5b9cca4f7763e373, 0x682e6ff3d6b2b8a3,
    0x748f82ee5defb2fc, 0x78a5636f43172f60, 0x84c87814a1f0ab72, 0x8cc702081a6439ec,
    0x90befffa23631e28, 0xa4506cebde82bde9, 0xbef9a3f7b2c67915, 0xc67178f2e372532b,
    0xca273eceea26619c, 0xd186b8c721c0c207, 0xeada7dd6cde0eb1e, 0xf57d4f7fee6ed178,
    0x06f067aa72176fba, 0x0a637dc5a2c898a6, 0x113f9804bef90dae, 0x1b710b35131c471b,
    0x28db77f523047d84, 0x32caab7b40c72493, 0x3c9ebe0a15c9bebc, 0x431d67c49c100d4c,
    0x4cc5d4becb3e42b6, 0x597f299cfc657e2a, 0x5fcb6fab3ad6faec, 0x6c44198c4a475817,
)

# FIPS 180-4 section 5.3.5: initial hash value (square roots of the first eight primes).
_H0 = b"".join(h.to_bytes(8, "big") for h in (
    0x6a09e667f3bcc908, 0xbb67ae8584caa73b, 0x3c6ef372fe94f82b, 0xa54ff53a5f1d36f1,
    0x510e527fade682d1, 0x9b05688c2b3e6c1f, 0x1f83d9abfb41bd6b, 0x5be0cd19137e2179,
))


def _compress_plain(h, block, w):
    """Run the 80 rounds of FIPS 180-4 section 6.4.2 over one 128-byte block.

    h is the 64-byte state (bytearray, updated in place), w an 80-slot scratch list reused
    across blocks so a long message does not allocate a schedule per block.
    """
    M = _M
    for t in range(16):
        w[t] = int.from_bytes(block[8 * t:8 * t + 8], "big")
    for t in range(16, 80):
        x = w[t - 15]
        s0 = ((x >> 1) | (x << 63)) ^ ((x >> 8) | (x << 56)) ^ (x >> 7)
        x = w[t - 2]
        s1 = ((x >> 19) | (x << 45)) ^ ((x >> 61) | (x << 3)) ^ (x >> 6)
        w[t] = (w[t - 16] + (s0 & M) + w[t - 7] + (s1 & M)) & M
    v = [int.from_bytes(h[8 * i:8 * i + 8], "big") for i in range(8)]
    a, b, c, d, e, f, g, hh = v
    K = _K
    for t in range(80):
        S1 = ((e >> 14) | (e << 50)) ^ ((e >> 18) | (e << 46)) ^ ((e >> 41) | (e << 23))
        ch = (e & f) ^ (~e & g)
        t1 = hh + (S1 & M) + (ch & M) + K[t] + w[t]
        S0 = ((a >> 28) | (a << 36)) ^ ((a >> 34) | (a << 30)) ^ ((a >> 39) | (a << 25))
        maj = (a & b) ^ (a & c) ^ (b & c)
        hh = g
        g = f
        f = e
        e = (d + t1) & M
        d = c
        c = b
        b = a
        a = (t1 + (S0 & M) + maj) & M
    for i, x in enumerate((a, b, c, d, e, f, g, hh)):
        h[8 * i:8 * i + 8] = ((v[i] + x) & M).to_bytes(8, "big")


def _scratch_plain():
    return [0] * 80


try:
    import micropython
    from array import array

    _K32 = array("I", [0] * 160)       # _K as (high, low) 32-bit halves
    for _i in range(80):
        _K32[2 * _i] = _K[_i] >> 32
        _K32[2 * _i + 1] = _K[_i] & 0xFFFFFFFF
    del _i

    @micropython.viper
    def _compress_viper(st: ptr8, blk: ptr8, w: ptr32):
        """_compress_plain() with each 64-bit word as (high, low) 32-bit halves: w[0:160]
        is the schedule, w[160:176] the state; every left shift and sum is masked to 32
        bits and multi-term sums of low halves carry through 16-bit quarters."""
        M = uint(0xFFFFFFFF)
        k = ptr32(_K32)
        i = 0
        while i < 32:
            j = i << 2
            w[i] = ((uint(blk[j]) << 24) | (uint(blk[j + 1]) << 16) | (uint(blk[j + 2]) << 8)
                    | uint(blk[j + 3]))
            i += 1
        while i < 160:              # W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16]
            xh = uint(w[i - 30])
            xl = uint(w[i - 29])
            s0h = ((xh >> 1) | (xl << 31)) ^ ((xh >> 8) | (xl << 24)) ^ (xh >> 7)
            s0l = (((xl >> 1) | (xh << 31)) ^ ((xl >> 8) | (xh << 24))
                   ^ ((xl >> 7) | (xh << 25))) & M
            xh = uint(w[i - 4])
            xl = uint(w[i - 3])
            s1h = ((xh >> 19) | (xl << 13)) ^ ((xl >> 29) | (xh << 3)) ^ (xh >> 6)
            s1l = (((xl >> 19) | (xh << 13)) ^ ((xh >> 29) | (xl << 3))
                   ^ ((xl >> 6) | (xh << 26))) & M
            yl = uint(w[i - 13])
            zl = uint(w[i - 31])
            q = (s0l & 0xFFFF) + (s1l & 0xFFFF) + (yl & 0xFFFF) + (zl & 0xFFFF)
            c = (s0l >> 16) + (s1l >> 16) + (yl >> 16) + (zl >> 16) + (q >> 16)
            w[i + 1] = (q & 0xFFFF) | ((c & 0xFFFF) << 16)
            w[i] = (s0h + s1h + uint(w[i - 14]) + uint(w[i - 32]) + (c >> 16)) & M
            i += 2
        i = 0
        while i < 16:
            j = i << 2
            w[160 + i] = ((uint(st[j]) << 24) | (uint(st[j + 1]) << 16)
                          | (uint(st[j + 2]) << 8) | uint(st[j + 3]))
            i += 1
        ah = uint(w[160])
        al = uint(w[161])
        bh = uint(w[162])
        bl = uint(w[163])
        ch = uint(w[164])
        cl = uint(w[165])
        dh = uint(w[166])
        dl = uint(w[167])
        eh = uint(w[168])
        el = uint(w[169])
        fh = uint(w[170])
        fl = uint(w[171])
        gh = uint(w[172])
        gl = uint(w[173])
        hh = uint(w[174])
        hl = uint(w[175])
        i = 0
        while i < 160:
            # t1 = h + S1(e) + ch(e, f, g) + K[t] + W[t]
            s1h = ((eh >> 14) | (el << 18)) ^ ((eh >> 18) | (el << 14)) ^ ((el >> 9) | (eh << 23))
            s1l = (((el >> 14) | (eh << 18)) ^ ((el >> 18) | (eh << 14))
                   ^ ((eh >> 9) | (el << 23))) & M
            xh = gh ^ (eh & (fh ^ gh))
            xl = gl ^ (el & (fl ^ gl))
            yl = uint(k[i + 1])
            zl = uint(w[i + 1])
            q = (hl & 0xFFFF) + (s1l & 0xFFFF) + (xl & 0xFFFF) + (yl & 0xFFFF) + (zl & 0xFFFF)
            c = (hl >> 16) + (s1l >> 16) + (xl >> 16) + (yl >> 16) + (zl >> 16) + (q >> 16)
            t1l = (q & 0xFFFF) | ((c & 0xFFFF) << 16)
            t1h = (hh + s1h + xh + uint(k[i]) + uint(w[i]) + (c >> 16)) & M
            # t2 = S0(a) + maj(a, b, c)
            s0h = ((ah >> 28) | (al << 4)) ^ ((al >> 2) | (ah << 30)) ^ ((al >> 7) | (ah << 25))
            s0l = (((al >> 28) | (ah << 4)) ^ ((ah >> 2) | (al << 30))
                   ^ ((ah >> 7) | (al << 25))) & M
            xh = (ah & bh) | (ch & (ah | bh))
            xl = (al & bl) | (cl & (al | bl))
            hh = gh
            hl = gl
            gh = fh
            gl = fl
            fh = eh
            fl = el
            q = (dl & 0xFFFF) + (t1l & 0xFFFF)
            c = (dl >> 16) + (t1l >> 16) + (q >> 16)
            el = (q & 0xFFFF) | ((c & 0xFFFF) << 16)
            eh = (dh + t1h + (c >> 16)) & M
            dh = ch
            dl = cl
            ch = bh
            cl = bl
            bh = ah
            bl = al
            q = (t1l & 0xFFFF) + (s0l & 0xFFFF) + (xl & 0xFFFF)
            c = (t1l >> 16) + (s0l >> 16) + (xl >> 16) + (q >> 16)
            al = (q & 0xFFFF) | ((c & 0xFFFF) << 16)
            ah = (t1h + s0h + xh + (c >> 16)) & M
            i += 2
        w[0] = ah
        w[1] = al
        w[2] = bh
        w[3] = bl
        w[4] = ch
        w[5] = cl
        w[6] = dh
        w[7] = dl
        w[8] = eh
        w[9] = el
        w[10] = fh
        w[11] = fl
        w[12] = gh
        w[13] = gl
        w[14] = hh
        w[15] = hl
        i = 0
        while i < 8:                # state += working variables, back to big-endian bytes
            xl = uint(w[2 * i + 1])
            yl = uint(w[161 + 2 * i])
            q = (xl & 0xFFFF) + (yl & 0xFFFF)
            c = (xl >> 16) + (yl >> 16) + (q >> 16)
            xl = (q & 0xFFFF) | ((c & 0xFFFF) << 16)
            xh = (uint(w[2 * i]) + uint(w[160 + 2 * i]) + (c >> 16)) & M
            j = i << 3
            st[j] = xh >> 24
            st[j + 1] = xh >> 16
            st[j + 2] = xh >> 8
            st[j + 3] = xh
            st[j + 4] = xl >> 24
            st[j + 5] = xl >> 16
            st[j + 6] = xl >> 8
            st[j + 7] = xl
            i += 1

    # The viper schedule keeps nothing from one block to the next, so every hash object
    # shares one buffer (compressions never interleave: MicroPython runs them to the end).
    _SCRATCH = bytearray(4 * 176)

    def _scratch_viper():
        return _SCRATCH

    _compress = _compress_viper
    _scratch = _scratch_viper
    VIPER = True
except (ImportError, SyntaxError, NameError):
    _compress = _compress_plain
    _scratch = _scratch_plain
    VIPER = False


class SHA512:
    """Incremental SHA-512 with the hashlib interface (update/digest/hexdigest/copy)."""

    name = "sha512"
    digest_size = DIGEST_SIZE
    block_size = BLOCK_SIZE

    def __init__(self, data=None):
        self._h = bytearray(_H0)  # the state: 8 big-endian 64-bit words
        self._buf = b""          # < 128 bytes not yet compressed
        self._len = 0            # bytes hashed so far
        self._w = _scratch()
        if data is not None:
            self.update(data)

    def update(self, data):
        """Add bytes-like `data` to the message.

        Raises:
            TypeError: data is not bytes-like.
        """
        if isinstance(data, str):
            raise TypeError("sha512 needs bytes")
        if not isinstance(data, bytes):
            data = bytes(data)
        self._len += len(data)
        buf = self._buf
        if buf:
            need = BLOCK_SIZE - len(buf)
            if len(data) < need:
                self._buf = buf + data
                return
            _compress(self._h, buf + data[:need], self._w)
            data = data[need:]
        n = len(data) - len(data) % BLOCK_SIZE
        if n:
            mv = memoryview(data)
            for off in range(0, n, BLOCK_SIZE):
                _compress(self._h, mv[off:off + BLOCK_SIZE], self._w)
        self._buf = data[n:]

    def copy(self):
        """Return an independent hash object with the same state."""
        o = SHA512()
        o._h = bytearray(self._h)
        o._buf = self._buf
        o._len = self._len
        return o

    def digest(self):
        """Return the 64-byte digest of the data so far (the object stays usable).

        Padding per FIPS 180-4 section 5.1.2: 0x80, zeros, then the bit length as a
        128-bit big-endian integer, so 112 or more buffered bytes need an extra block.
        """
        h = bytearray(self._h)
        buf = self._buf
        pad = (BLOCK_SIZE + 112 - 1 - len(buf)) % BLOCK_SIZE
        tail = buf + b"\x80" + bytes(pad) + (self._len * 8).to_bytes(16, "big")
        w = self._w
        for off in range(0, len(tail), BLOCK_SIZE):
            _compress(h, tail[off:off + BLOCK_SIZE], w)
        return bytes(h)

    def hexdigest(self):
        return "".join("%02x" % b for b in self.digest())


try:
    from hashlib import sha512 as _native
except ImportError:
    _native = None

NATIVE = _native is not None


def new(data=b""):
    """Return a SHA-512 hash object over `data`: hashlib's where present, else pure.

    Args:
        data: initial bytes-like message (may be empty).
    Returns:
        An object with update(), digest(), hexdigest(), copy().
    """
    if _native is not None:
        return _native(data)
    return SHA512(data)


def sha512(data):
    """Return the 64-byte SHA-512 digest of bytes-like `data`."""
    return new(data).digest()
