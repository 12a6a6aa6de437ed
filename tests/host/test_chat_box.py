"""The app's box (tssb.chat.box) against an independent implementation of the documented
construction (appbox.py: plain Python, no libsodium), both ways, and bad boxes."""
import random

import nacl.bindings as nb
import pytest

from appbox import curve_pk, open_box as app_open, seal as app_seal, secretbox, x25519_base, \
    curve_sk
from tssb.chat import appmsg, box


def _id(i):
    seed = bytes([i]) * 32
    pk, sk = nb.crypto_sign_seed_keypair(seed)
    return seed, pk, box.Keys(sk)


IDS = [_id(i) for i in range(1, 10)]


def test_the_independent_primitives_are_the_standard_ones():
    # checked once against libsodium, so a mismatch below is the box's, not theirs
    key, nonce, msg = bytes(range(32)), bytes(range(24)), b"attack at dawn" * 5
    assert secretbox(msg, nonce, key) == nb.crypto_secretbox(msg, nonce, key)
    seed, pk, _ = IDS[0]
    sk64 = nb.crypto_sign_seed_keypair(seed)[1]
    assert curve_pk(pk) == nb.crypto_sign_ed25519_pk_to_curve25519(pk)
    assert x25519_base(curve_sk(seed)) == nb.crypto_scalarmult_base(
        nb.crypto_sign_ed25519_sk_to_curve25519(sk64))


def test_our_box_opens_in_the_independent_implementation_for_every_recipient():
    pks = [pk for _, pk, _ in IDS[:7]]
    plain = b"\x8c hello seven"
    raw = box.seal(plain, pks)
    assert len(raw) == 24 + 32 + 7 * 49 + len(plain) + 16
    for seed, _, _ in IDS[:7]:
        assert app_open(raw, seed) == plain
    assert app_open(raw, IDS[7][0]) is None          # not a recipient: nothing


def test_the_independent_box_opens_with_ours_slot_and_count():
    pks = [pk for _, pk, _ in IDS[:3]]
    raw = app_seal(b"from the app", pks)
    for i, (_, _, keys) in enumerate(IDS[:3]):
        got = box.open_box(raw, keys)
        assert (got.plain, got.slot, got.count, got.damaged) == (b"from the app", i, 3, None)
    assert box.open_box(raw, IDS[5][2]) is None


def test_eight_recipients_are_refused_and_an_eighth_slot_is_never_tried():
    pks = [pk for _, pk, _ in IDS[:8]]
    with pytest.raises(box.BoxError, match="1 to 7"):
        box.seal(b"x", pks)
    with pytest.raises(box.BoxError):
        box.seal(b"x", [])
    # the app itself seals 8 slots; its own reader (and ours) stop at slot 6
    raw = app_seal(b"eight", pks)
    assert app_open(raw, IDS[6][0]) == b"eight"
    assert app_open(raw, IDS[7][0]) is None
    assert box.open_box(raw, IDS[6][2]).plain == b"eight"
    assert box.open_box(raw, IDS[7][2]) is None


def test_bad_recipient_keys_are_refused():
    with pytest.raises(box.BoxError):
        box.seal(b"x", [b"\xff" * 32])        # not a point on the curve


def _flip(raw, i):
    b = bytearray(raw)
    b[i] ^= 0x01
    return bytes(b)


def test_malformed_boxes_never_raise_and_say_what_they_are():
    seed, pk, keys = IDS[0]
    raw = box.seal(b"a message worth keeping", [IDS[1][1], pk])
    assert box.open_box(raw, keys).plain == b"a message worth keeping"
    body_at = 56 + 2 * 49
    # a flipped bit: in the nonce or the ephemeral key nothing opens; in our slot neither
    # (the other slot is not ours); in the body the slot opens and the body does not
    for i in (0, 30, 56 + 49 + 5):
        assert box.open_box(_flip(raw, i), keys) is None, i
    got = box.open_box(_flip(raw, body_at + 20), keys)
    assert got.plain is None and got.slot == 1 and "does not open" in got.damaged
    # truncated: inside the slots, or inside the body
    assert box.open_box(raw[:56 + 49 + 20], keys) is None
    got = box.open_box(raw[:-3], keys)
    assert got.plain is None and got.damaged
    # a slot that opens and a body shorter than a MAC: the app's decrypt throws on this
    short = raw[:body_at + 10]
    with pytest.raises(ValueError):
        app_open(short, seed)
    got = box.open_box(short, keys)
    assert got.plain is None and "shorter than its MAC" in got.damaged
    # a count byte pointing past the end (a slot sealed by someone with the key)
    nonce, kek = raw[:24], nb.crypto_scalarmult(keys.secret, raw[24:56])
    lie = raw[:56] + secretbox(bytes([200]) + bytes(32), nonce, kek) + raw[105:]
    assert box.open_box(lie, keys).damaged
    # a low-order ephemeral key, and junk
    assert box.open_box(bytes(24) + bytes(32) + raw[56:], keys) is None
    rnd = random.Random(5)
    for _ in range(300):
        junk = rnd.randbytes(rnd.randrange(0, 500))
        assert box.open_box(junk, keys) is None


def test_we_never_write_a_box_the_app_cannot_read():
    # an empty message still has a 16-byte body (the MAC), so the app's decrypt is safe
    raw = box.seal(b"", [IDS[0][1]])
    assert len(raw) == 56 + 49 + 16
    assert app_open(raw, IDS[0][0]) == b""
    # the app's decrypt (appbox.open_box: it raises where the app throws) opens every box
    # we write for each of 1-7 recipients: never under 56 bytes (SSBid.kt:117/118), a
    # count byte of 1-7 (>= 128 is a negative JVM byte, :128), a body of a MAC or more
    # (SodiumAPI.kt:49)
    for n in (1, 2, 7):
        ids = IDS[:n]
        for plain in (b"", appmsg.tav("hi", ts=1778385096)):
            raw = box.seal(plain, [pk for _, pk, _ in ids])
            assert len(raw) == 56 + 49 * n + 16 + len(plain)
            for i, (seed, pk, keys) in enumerate(ids):
                assert app_open(raw, seed) == plain
                got = box.open_box(raw, keys)
                assert got.plain == plain and got.slot == i and got.count == n


def test_the_apps_decrypt_throws_where_documented_and_ours_never_does():
    seed, pk, keys = IDS[0]
    raw = box.seal(b"a message worth keeping", [pk, IDS[1][1]])
    for cut, site in ((0, "117"), (23, "117"), (24, "118"), (55, "118")):
        with pytest.raises(ValueError, match="SSBid.kt:" + site):
            app_open(raw[:cut], seed)
        assert box.open_box(raw[:cut], keys) is None
    nonce, kek = raw[:24], nb.crypto_scalarmult(keys.secret, raw[24:56])
    for count, site in ((128, "SSBid.kt:128"), (254, "SSBid.kt:128"), (7, "MAC")):
        lie = raw[:56] + secretbox(bytes([count]) + bytes(32), nonce, kek) + raw[105:]
        with pytest.raises(ValueError, match=site):
            app_open(lie, seed)
        assert box.open_box(lie, keys).plain is None
    # 255 is -1 to the JVM: the body is read from byte 7 and does not open (no throw)
    lie = raw[:56] + secretbox(bytes([255]) + bytes(32), nonce, kek) + raw[105:]
    assert app_open(lie, seed) is None and box.open_box(lie, keys).plain is None
