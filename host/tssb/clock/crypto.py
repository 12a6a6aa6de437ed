"""Ed25519 for the clock protocols: the core's `tinyssb.crypto` (PyNaCl on hosts)."""
from tinyssb.crypto import publickey as _publickey, sign as _sign, verify as _verify


def sign(seed, msg):
    """Detached Ed25519 signature (64 bytes) of msg by the 32-byte seed."""
    return bytes(_sign(seed, msg))


def verify(pub, msg, sig):
    """True when sig is a valid Ed25519 signature of msg by the 32-byte public key."""
    if len(pub) != 32 or len(sig) != 64:
        return False
    return bool(_verify(pub, msg, sig))


def publickey(seed):
    """The Ed25519 public key (32 bytes) of a 32-byte seed."""
    return bytes(_publickey(seed))
