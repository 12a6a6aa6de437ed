"""SHA-512 (FIPS 180-4) in pure Python, for ports whose hashlib lacks it.

MicroPython's hashlib has sha256 but no sha512, and Ed25519 (RFC 8032) hashes with
SHA-512. `new()` returns hashlib's object where it exists (CPython: C speed) and the pure
`SHA512` below elsewhere; both offer update() / digest() / hexdigest() / copy().

The pure compression works on 64-bit words as Python ints (arbitrary precision on every
port), masking after each addition and rotation.
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
_H0 = (
    0x6a09e667f3bcc908, 0xbb67ae8584caa73b, 0x3c6ef372fe94f82b, 0xa54ff53a5f1d36f1,
    0x510e527fade682d1, 0x9b05688c2b3e6c1f, 0x1f83d9abfb41bd6b, 0x5be0cd19137e2179,
)


def _compress(h, block, w):
    """Run the 80 rounds of FIPS 180-4 section 6.4.2 over one 128-byte block.

    h is the 8-word state (list, updated in place), w an 80-slot scratch list reused
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
    a, b, c, d, e, f, g, hh = h
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
    h[0] = (h[0] + a) & M
    h[1] = (h[1] + b) & M
    h[2] = (h[2] + c) & M
    h[3] = (h[3] + d) & M
    h[4] = (h[4] + e) & M
    h[5] = (h[5] + f) & M
    h[6] = (h[6] + g) & M
    h[7] = (h[7] + hh) & M


class SHA512:
    """Incremental SHA-512 with the hashlib interface (update/digest/hexdigest/copy)."""

    name = "sha512"
    digest_size = DIGEST_SIZE
    block_size = BLOCK_SIZE

    def __init__(self, data=None):
        self._h = list(_H0)
        self._buf = b""          # < 128 bytes not yet compressed
        self._len = 0            # bytes hashed so far
        self._w = [0] * 80
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
        o._h = list(self._h)
        o._buf = self._buf
        o._len = self._len
        return o

    def digest(self):
        """Return the 64-byte digest of the data so far (the object stays usable).

        Padding per FIPS 180-4 section 5.1.2: 0x80, zeros, then the bit length as a
        128-bit big-endian integer, so 112 or more buffered bytes need an extra block.
        """
        h = list(self._h)
        buf = self._buf
        pad = (BLOCK_SIZE + 112 - 1 - len(buf)) % BLOCK_SIZE
        tail = buf + b"\x80" + bytes(pad) + (self._len * 8).to_bytes(16, "big")
        w = self._w
        for off in range(0, len(tail), BLOCK_SIZE):
            _compress(h, tail[off:off + BLOCK_SIZE], w)
        out = bytearray(DIGEST_SIZE)
        for i in range(8):
            out[8 * i:8 * i + 8] = h[i].to_bytes(8, "big")
        return bytes(out)

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
