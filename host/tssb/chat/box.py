"""The Android app's box: one private message, readable by up to 7 recipients.

    nonce(24) || ephemeral curve25519 public key(32) || N slots x 49 || secretbox(body)

A fresh Ed25519 key pair per message, converted to Curve25519, is the ephemeral key. For
each recipient, in list order, the slot is secretbox(bytes([N]) || dek, nonce, k) with
k = crypto_scalarmult(ephemeral secret, curve25519(recipient's Ed25519 key)): the raw
shared point, not hashed. The body is secretbox(plaintext, nonce, dek) under the same
nonce. (`A/crypto/SSBid.kt:92-134` in the reference; docs/interop.md, "Chats".)

A reader tries its key on slots 0-6 only, as the app does: an eighth recipient could never
open its copy, so `seal` refuses more than MAX_RECIPIENTS. A box whose slot opens but whose
body is shorter than a MAC makes the app's decrypt throw: `seal` never writes one (a
secretbox is never shorter), and `open_box` reports it as damaged instead of failing.
Everything here takes untrusted bytes and never raises on them.
"""
import os

import nacl.bindings as nb
import nacl.exceptions

NONCE_LEN = 24
KEY_LEN = 32
MAC_LEN = 16
SLOT_LEN = 1 + KEY_LEN + MAC_LEN    # count byte and data key, boxed: 49
HEAD_LEN = NONCE_LEN + KEY_LEN      # nonce and ephemeral key: 56
MAX_RECIPIENTS = 7                  # the app tries slots 0-6 (SSBid.kt:123); its UI refuses 8


class BoxError(ValueError):
    """A box that cannot be made (too many recipients, a key that is no curve point)."""


def curve_public(ed_public):
    """The Curve25519 form of an Ed25519 public key. Raises: BoxError."""
    try:
        return nb.crypto_sign_ed25519_pk_to_curve25519(bytes(ed_public))
    except (nacl.exceptions.CryptoError, TypeError):
        raise BoxError("not an Ed25519 public key: %s" % bytes(ed_public).hex()[:16])


def seal(plaintext, recipients, urandom=os.urandom):
    """Box `plaintext` for `recipients` (32-byte Ed25519 public keys, in slot order).

    Returns: the box (bytes).
    Raises: BoxError for no recipients, more than MAX_RECIPIENTS, or a bad key.
    """
    n = len(recipients)
    if not 1 <= n <= MAX_RECIPIENTS:
        raise BoxError("a box has 1 to %d recipients (the app opens 7 slots), not %d"
                       % (MAX_RECIPIENTS, n))
    curves = [curve_public(r) for r in recipients]
    nonce = urandom(NONCE_LEN)
    dek = urandom(KEY_LEN)
    eph_pk, eph_sk = nb.crypto_sign_seed_keypair(urandom(KEY_LEN))
    eph_secret = nb.crypto_sign_ed25519_sk_to_curve25519(eph_sk)
    out = [nonce, nb.crypto_sign_ed25519_pk_to_curve25519(eph_pk)]
    cdek = bytes([n]) + dek
    for c in curves:
        try:
            kek = nb.crypto_scalarmult(eph_secret, c)
        except nacl.exceptions.CryptoError:     # a low-order point: no shared key
            raise BoxError("a recipient key gives no shared secret")
        out.append(nb.crypto_secretbox(cdek, nonce, kek))
    out.append(nb.crypto_secretbox(bytes(plaintext), nonce, dek))
    return b"".join(out)


class Keys:
    """Our side of opening boxes: the Curve25519 form of our Ed25519 secret key.

    Args: secret_key: the 64-byte libsodium Ed25519 secret key (seed || public).
    """

    def __init__(self, secret_key):
        self.secret = nb.crypto_sign_ed25519_sk_to_curve25519(bytes(secret_key))


class Opened:
    """What opening a box gave.

    Attributes:
        plain: the plaintext, or None when the slot opened but the body did not (damaged).
        slot: the slot our key opened.  count: the recipient count the slot names.
        damaged: why the body could not be read, or None.
    """
    __slots__ = ("plain", "slot", "count", "damaged")

    def __init__(self, plain, slot, count, damaged=None):
        self.plain = plain
        self.slot = slot
        self.count = count
        self.damaged = damaged


def open_box(box, keys):
    """Open a box with our keys (tssb.chat.box.Keys).

    Returns: Opened, or None when no slot of 0..6 opens with our key (not for us, or not
    a box at all). Never raises.
    """
    box = bytes(box)
    if len(box) < HEAD_LEN + SLOT_LEN:
        return None
    nonce, eph = box[:NONCE_LEN], box[NONCE_LEN:HEAD_LEN]
    try:
        kek = nb.crypto_scalarmult(keys.secret, eph)
    except nacl.exceptions.CryptoError:     # low-order ephemeral key: nobody's box
        return None
    for i in range(MAX_RECIPIENTS):
        at = HEAD_LEN + i * SLOT_LEN
        if at + SLOT_LEN > len(box):
            return None
        try:
            cdek = nb.crypto_secretbox_open(box[at:at + SLOT_LEN], nonce, kek)
        except nacl.exceptions.CryptoError:
            continue
        n = cdek[0]
        body = box[HEAD_LEN + n * SLOT_LEN:]
        if len(body) < MAC_LEN:
            # the app's decrypt throws on this (SodiumAPI.kt:49); we only say so
            return Opened(None, i, n, "body shorter than its MAC")
        try:
            return Opened(nb.crypto_secretbox_open(body, nonce, cdek[1:]), i, n)
        except nacl.exceptions.CryptoError:
            return Opened(None, i, n, "body does not open with the slot's key")
    return None
