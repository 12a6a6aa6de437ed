"""Ed25519 for the rest of the core: PyNaCl (libsodium) where importable, else pure Python.

  BACKEND                 "nacl" on hosts with PyNaCl, "pure" on boards (tinyssb.ed25519)
  new_seed()           -> 32 random bytes (a new identity's secret)
  publickey(seed)      -> 32-byte public key
  sign(seed, msg)      -> 64-byte signature
  verify(pub, msg, sig) -> bool; never raises, whatever the input

Both backends accept and reject the same signatures (the pure verifier copies libsodium's
rules; tests/host/test_crypto_nacl.py checks it case by case). On CPython the environment
variable TSSB_CRYPTO=pure forces the pure backend (to measure what a board pays).
"""

try:
    import os
except ImportError:       # very small ports
    os = None

BACKEND = "pure"
# True when new_seed() has no OS entropy source and falls back to a weak mix (see below).
WEAK_RANDOM = False

_force_pure = False
try:
    _force_pure = os.getenv("TSSB_CRYPTO") == "pure"
except Exception:         # MicroPython's os may lack getenv
    pass

_nacl = None
if not _force_pure:
    try:
        from nacl import bindings as _nacl
        BACKEND = "nacl"
    except ImportError:
        _nacl = None

if _nacl is None:
    from tinyssb import ed25519 as _pure


def _urandom(n):
    try:
        return os.urandom(n)
    except Exception:
        return None


def new_seed():
    """Return 32 fresh random bytes for a new Ed25519 identity.

    Uses os.urandom (on the ESP32 that is the hardware RNG). A port without it gets
    SHA-512 over the random module's output and the tick counter, and WEAK_RANDOM is set
    so the firmware can warn: such a seed is not fit for a long-lived identity.

    Returns:
        32 bytes.
    """
    global WEAK_RANDOM
    seed = _urandom(32) if os is not None else None
    if seed is not None and len(seed) == 32:
        return bytes(seed)
    WEAK_RANDOM = True
    import random
    from tinyssb import sha512
    h = sha512.new()
    try:
        import time
        h.update(str(time.ticks_us()).encode())
    except Exception:
        pass
    for _ in range(16):
        h.update(random.getrandbits(32).to_bytes(4, "little"))
    return h.digest()[:32]


if _nacl is not None:
    _last = [None, None]      # (seed, 64-byte libsodium secret key): signing repeats a key

    def _secret(seed):
        if _last[0] != seed:
            _last[1] = _nacl.crypto_sign_seed_keypair(seed)[1]
            _last[0] = seed
        return _last[1]

    def publickey(seed):
        """Public key of a 32-byte seed (raises ValueError on a wrong length)."""
        seed = bytes(seed)
        if len(seed) != 32:
            raise ValueError("ed25519 seed must be 32 bytes")
        return _nacl.crypto_sign_seed_keypair(seed)[0]

    def sign(seed, msg):
        """64-byte Ed25519 signature of msg (raises ValueError on a wrong seed length)."""
        seed = bytes(seed)
        if len(seed) != 32:
            raise ValueError("ed25519 seed must be 32 bytes")
        return _nacl.crypto_sign(bytes(msg), _secret(seed))[:64]

    def verify(pub, msg, sig):
        """True iff sig is pub's valid signature of msg; False on any bad input."""
        try:
            pub = bytes(pub)
            sig = bytes(sig)
            if len(pub) != 32 or len(sig) != 64:
                return False
            _nacl.crypto_sign_open(sig + bytes(msg), pub)
            return True
        except Exception:
            return False
else:
    def publickey(seed):
        """Public key of a 32-byte seed (raises ValueError on a wrong length)."""
        return _pure.publickey(seed)

    _last = [None, None]      # (seed, public key): sign() would otherwise derive it each time

    def sign(seed, msg):
        """64-byte Ed25519 signature of msg (raises ValueError on a wrong seed length)."""
        seed = bytes(seed)
        if _last[0] != seed:
            _last[1] = _pure.publickey(seed)
            _last[0] = seed
        return _pure.sign(seed, msg, _last[1])

    def verify(pub, msg, sig):
        """True iff sig is pub's valid signature of msg; False on any bad input."""
        return _pure.verify(pub, msg, sig)
