"""Ed25519 behind two functions: the core's `tinyssb.crypto` when it exists, else PyNaCl."""
try:  # the protocol core's module (contract 6), once the lead has added it
    from tinyssb.crypto import sign as _sign, verify as _verify, publickey as _publickey
except ImportError:  # pragma: no cover - depends on the tree's state
    import nacl.exceptions
    import nacl.signing

    def _sign(seed, msg):
        return nacl.signing.SigningKey(bytes(seed)).sign(bytes(msg)).signature

    def _verify(pub, msg, sig):
        try:
            nacl.signing.VerifyKey(bytes(pub)).verify(bytes(msg), bytes(sig))
            return True
        except (nacl.exceptions.BadSignatureError, ValueError):
            return False

    def _publickey(seed):
        return bytes(nacl.signing.SigningKey(bytes(seed)).verify_key)


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
