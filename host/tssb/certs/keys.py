"""Signature schemes for records: Ed25519 for real feeds, a keyed hash for fast tests.

A scheme has `public(seed)`, `sign(seed, msg)` and `verify(pub, msg, sig) -> bool`, with
32-byte seeds and public keys and 64-byte signatures, the shapes of tinySSB's Ed25519.
"""
from hashlib import sha256, sha512

import nacl.bindings
import nacl.exceptions


class Ed25519:
    """Ed25519 through PyNaCl (libsodium); the secret key of a seed is cached."""

    def __init__(self):
        self._sk = {}

    def _secret(self, seed):
        sk = self._sk.get(seed)
        if sk is None:
            if len(self._sk) > 64:  # a host signs with a handful of keys; keep it small
                self._sk.clear()
            sk = nacl.bindings.crypto_sign_seed_keypair(bytes(seed))[1]
            self._sk[bytes(seed)] = sk
        return sk

    def public(self, seed):
        return self._secret(seed)[32:]

    def sign(self, seed, msg):
        return nacl.bindings.crypto_sign(bytes(msg), self._secret(seed))[:64]

    def verify(self, pub, msg, sig):
        if len(pub) != 32 or len(sig) != 64:
            return False
        try:
            nacl.bindings.crypto_sign_open(bytes(sig) + bytes(msg), bytes(pub))
            return True
        except (nacl.exceptions.BadSignatureError, ValueError):
            return False


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
