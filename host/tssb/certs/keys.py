"""Signature schemes for records: Ed25519 for real feeds, a keyed hash for fast tests.

A scheme has `public(seed)`, `sign(seed, msg)` and `verify(pub, msg, sig) -> bool`, with
32-byte seeds and public keys and 64-byte signatures, the shapes of tinySSB's Ed25519.
"""
from hashlib import sha256, sha512

from tinyssb import crypto


class Ed25519:
    """Ed25519 through the core's `tinyssb.crypto` (PyNaCl on hosts)."""

    def public(self, seed):
        return crypto.publickey(bytes(seed))

    def sign(self, seed, msg):
        return crypto.sign(bytes(seed), bytes(msg))

    def verify(self, pub, msg, sig):
        return crypto.verify(bytes(pub), bytes(msg), bytes(sig))


class KeyedHash:
    """NOT a signature: sig = SHA-512(public || msg) with public = SHA-256(seed).

    Anyone can forge it; it exists so exhaustive tests can exercise the tree logic
    without paying for a million Ed25519 operations. Tampering with the message still
    changes the expected value, so tampering tests keep their power.
    """

    def public(self, seed):
        return sha256(bytes(seed)).digest()

    def sign(self, seed, msg):
        return sha512(self.public(seed) + bytes(msg)).digest()

    def verify(self, pub, msg, sig):
        return sha512(bytes(pub) + bytes(msg)).digest() == bytes(sig)


ED25519 = Ed25519()
