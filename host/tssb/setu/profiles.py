"""Element IDs, check hashes, bucket mapping and IBF sizing: the two SETU profiles.

Both profiles share the element hash and the 64-bit element ID (key) derivation, so a set's
precomputed keys serve either profile:

  element hash  SHA-512( size u16 LE || etype u16 LE || data )   (GNUnet GNUNET_SETU_element_hash:
                the two uint16 fields as they sit in memory on x86)
  key           HKDF: PRK = HMAC-SHA512(key=element hash, msg=u16 0), OKM = HMAC-SHA256(PRK, 0x01),
                key = OKM[0:8] as a little-endian uint64 (GNUnet get_ibf_key; draft 3.2)
  salting       rotate the key right by (salt * 7) mod 64 (draft 3.2, GNUnet salt_key)

`GnunetProfile` (id 0) then computes exactly what GNUnet's ibf.c computes (reference 1.2):
HASHSUM = CRC-32 of the key's 4 low bytes (LE), and bucket i+1 = CRC-32 of the 8 LE bytes of
(bucket_i << 32 | i), keeping the first 3 distinct values mod L. CRC-32 is affine over XOR, so
this check hash cannot reject impure buckets (reference 1.3).

`Tssb2Profile` (id 1) fixes that: a splitmix64-based check hash (not linear over XOR), a
partitioned mapping (bucket i lies in the i-th third of the table) that needs no rejection
loop, IBF sizes 3 * 2^j so that a large IBF folds exactly into every smaller one (the
incremental base IBF of setstate.py), and a FIFO peeling decoder (linear in L).
"""
import hashlib
import hmac
import struct
import zlib

from . import constants as C

M64 = 0xFFFFFFFFFFFFFFFF
_KDF_SALT = b"\x00\x00"          # GNUnet: uint16_t salt = 0 as the HKDF input keying material
_crc32 = zlib.crc32              # standard CRC-32, equal to GNUNET_CRYPTO_crc32_n (reference 1.2)
_U16LE = struct.Struct("<HH")


def element_hash(etype, data):
    """SHA-512 element hash as GNUnet computes it.

    Args:
        etype: application element type (0..65535).
        data: element bytes (at most 65535).
    Returns:
        64-byte digest.
    """
    h = hashlib.sha512(_U16LE.pack(len(data), etype))
    h.update(data)
    return h.digest()


def key_from_hash(ehash):
    """64-bit element ID (unsalted IBF key) from a 64-byte element hash (GNUnet get_ibf_key)."""
    prk = hmac.digest(ehash, _KDF_SALT, "sha512")
    okm = hmac.digest(prk, b"\x01", "sha256")
    return int.from_bytes(okm[:8], "little")


def salt_key(key, salt):
    """Rotate right by (salt*7) mod 64 (draft 3.2); the identity for s = 0 (GNUnet relies on x86)."""
    s = (salt * 7) % 64
    if s == 0:
        return key
    return ((key >> s) | (key << (64 - s))) & M64


def unsalt_key(key, salt):
    """Inverse of salt_key."""
    s = (salt * 7) % 64
    if s == 0:
        return key
    return ((key << s) | (key >> (64 - s))) & M64


def _mix64(z):
    """splitmix64 finalizer: a bijective, non-linear 64-bit mixer."""
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


class GnunetProfile:
    pid = C.PROFILE_GNUNET
    name = "gnunet"
    fifo_decode = False          # GNUnet rescans from bucket 0: always the lowest pure bucket
    foldable = False
    max_size = C.MAX_IBF_SIZE
    min_size = C.IBF_MIN_SIZE
    # GNUnet's strata estimator j salts with j*8 (a right rotation by 56*j mod 64 bits).
    se_salt_step = 8

    @staticmethod
    def check_hash(key):
        # IBF_KEY_HASH_VAL: CRC-32 over sizeof(struct IBF_KeyHash) = 4 bytes of the key.
        return _crc32((key & 0xFFFFFFFF).to_bytes(4, "little"))

    @staticmethod
    def indices(key, size):
        """GNUnet ibf_get_indices: k = 3 distinct buckets of [0, size)."""
        if size < C.IBF_HASH_NUM:
            raise ValueError("IBF too small")
        bucket = _crc32(key.to_bytes(8, "little"))
        out = []
        i = 0
        while len(out) < C.IBF_HASH_NUM:
            b = bucket % size
            if b not in out:
                out.append(b)
            bucket = _crc32(((bucket << 32) | i).to_bytes(8, "little"))
            i += 1
            if i > 4096:  # CRC cycles never this short for size >= 3; guard anyway
                raise ValueError("bucket mapping does not terminate")
        return out

    @staticmethod
    def valid_size(size):
        return C.IBF_MIN_SIZE <= size <= C.MAX_IBF_SIZE

    @staticmethod
    def initial_size(diff):
        """GNUnet get_size_from_difference: (2*diff) | 1, at least IBF_MIN_SIZE (draft 7.1.2)."""
        return min(C.MAX_IBF_SIZE - 1, max(C.IBF_MIN_SIZE, (int(diff * C.IBF_FACTOR)) | 1))

    @staticmethod
    def next_size(last):
        """Size after a failed decode. We apply no partial results of a failed IBF, so the
        draft's 2*(lis - de) is used with de = 0 (made odd, GNUnet "thesis 3.11")."""
        return min(C.MAX_IBF_SIZE - 1, max(C.IBF_MIN_SIZE, (C.IBF_FACTOR * last) | 1))


class Tssb2Profile:
    pid = C.PROFILE_TSSB2
    name = "tssb2"
    fifo_decode = True
    foldable = True
    min_size = 3 * 16
    max_size = 3 * (1 << 18)     # largest 3*2^j not above MAX_IBF_SIZE
    se_salt_step = 8

    @staticmethod
    def check_hash(key):
        return _mix64(key ^ 0x5BD1E9955BD1E995) >> 32

    @staticmethod
    def indices(key, size):
        """One bucket in each third of the table; for size = 3*2^j, index mod 2^j folds."""
        ha = _mix64(key)
        hb = _mix64(key ^ 0x2545F4914F6CDD1D)
        s1 = size // 3
        s2 = (2 * size) // 3
        return [(ha & 0xFFFFFFFF) % s1,
                s1 + (ha >> 32) % (s2 - s1),
                s2 + (hb & 0xFFFFFFFF) % (size - s2)]

    @classmethod
    def valid_size(cls, size):
        if size < cls.min_size or size > cls.max_size or size % 3:
            return False
        m = size // 3
        return m & (m - 1) == 0

    @classmethod
    def _round(cls, target):
        m = 16
        while 3 * m < target and 3 * m < cls.max_size:
            m *= 2
        return 3 * m

    @classmethod
    def initial_size(cls, diff):
        return cls._round(int(diff * C.IBF_FACTOR))

    @classmethod
    def next_size(cls, last):
        return cls._round(C.IBF_FACTOR * last)


PROFILES = {C.PROFILE_GNUNET: GnunetProfile, C.PROFILE_TSSB2: Tssb2Profile}


def profile(pid):
    """Profile class for an id; raises KeyError for unknown ids."""
    return PROFILES[pid]
