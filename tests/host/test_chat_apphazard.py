"""What the Android app throws on (tssb.chat.apphazard): raw content, checked against
outcomes recorded by running the app's own code, the whole class of first bytes, and
every content we write in the app's formats."""
import random

import nacl.bindings as nb

from tssb import posts
from tssb.chat import apphazard, appmsg
from tssb.store import Store

# (content, where the app's toFrontendObject threw on it, or None), recorded by running the
# app's own Kotlin (ssbc/tinySSB 39896b72, on the JVM) on both byte strings it decodes for
# an entry: the inline bytes as it arrives, the whole content once complete.
APP_OUTCOMES = [
    ("612072617720706f73742074657874", "SSBid.kt:117"),     # "a raw post text"
    ("61", "SSBid.kt:117"),                 # "a": only the zero-padded inline bytes throw
    ("09746162206669727374", "SSBid.kt:117"),
    ("79797979797979797979797979797979", "SSBid.kt:117"),
    ("596573", "SSBid.kt:117"),
    ("21", "SSBid.kt:117"),
    ("01", "SSBid.kt:117"),
    ("7468652072617720706f73742074657874", None),          # "the raw post text"
    ("2420646f6c6c6172", None),
    ("c3a9206669727374", None),                             # "é first"
    ("c980", "SSBid.kt:117"),                               # "ɀ"
    ("e98099e698afe4b880e5808be6b8ace8a9a6", "SSBid.kt:117"),   # a five-byte tag < 0
    ("e98099", None),
    ("342661626364", "Bipf.kt:491"),                        # "4&abcd": [true, ""]
    ("7c0e01", "Bipf.kt:491"),
    ("c902" + "7a" * 41, "SSBid.kt:118"),                   # whole content only
    ("c903" + "7a" * 60, None),                             # a 57-byte "box": opened, null
    ("34818080807f00", "Bipf.kt:226"),
    ("34e98099e698af", "Bipf.kt:226"),                      # "4這是"
    ("8e88f0f088", "Bipf.kt:276"),
    ("0e", None),
    ("00", None),
    ("", None),
]


def test_the_apps_outcomes_on_raw_content():
    for hx, site in APP_OUTCOMES:
        got = apphazard.hazard(bytes.fromhex(hx))
        if site is None:
            assert got is None, hx
        else:
            assert got is not None and site in got, (hx, got)
    assert apphazard.hazard(bytes.fromhex("612072617720706f73742074657874")) == \
        "a box of 12 bytes (IndexOutOfBoundsException at SSBid.kt:117)"


def test_every_ascii_first_byte_with_the_bytes_tag_throws_and_no_other():
    # an ASCII first byte with the low bits 001 announces a byte string of 0-15 bytes,
    # which always fits in the entry's first bytes: TAB, ! ) 1 9 A I Q Y a i q y, ...
    for b in range(0x80):
        for tail in (b"", b" raw post text", b"x" * 40, b"y" * 300):
            content = bytes([b]) + tail
            if b & 7 == 1:
                assert apphazard.hazard(content) is not None, content[:20]
            elif b & 7 in (0, 2, 3, 5, 7):   # strings, ints, dicts, nothing: never shown
                assert apphazard.hazard(content) is None, content[:20]
    assert "".join(chr(b) for b in range(0x21, 0x7f) if b & 7 == 1) == "!)19AIQYaiqy"


def test_everything_we_write_in_the_apps_formats_is_safe():
    rnd = random.Random(36)
    alphabet = [chr(c) for c in list(range(1, 0x7f)) + list(range(0xa0, 0x800, 7)) +
                list(range(0x4e00, 0xa000, 97)) + list(range(0x1f300, 0x1f600, 13))]
    me, other = nb.crypto_sign_seed_keypair(b"\x01" * 32)[0], \
        nb.crypto_sign_seed_keypair(b"\x02" * 32)[0]
    for _ in range(300):
        text = "".join(rnd.choice(alphabet) for _ in range(rnd.choice((1, 5, 30, 200))))
        for content in (appmsg.tav(text), appmsg.tav(text, b"\x01" * 50), appmsg.iam(text),
                        appmsg.private_tav(me, [other], text)[0]):
            assert apphazard.hazard(content) is None, content[:40]
    assert apphazard.hazard(appmsg.boxed(b"\x00" * (56 + 49 + 16))) is None


def test_old_raw_posts_still_read_as_their_text():
    for content in (bytes.fromhex(hx) for hx, site in APP_OUTCOMES if site):
        try:
            text = content.decode("utf-8")
        except UnicodeError:
            continue
        p = posts.decode(b"\x07" * 32, 1, content)
        assert p.kind == posts.TEXT and p.text == text and p.private is None
    # text that reads exactly as a BIPF byte string of 2057 bytes: not taken for a box
    text = "\u0240\x01" + "x" * 2057
    p = posts.decode(b"\x07" * 32, 1, text.encode())
    assert p.kind == posts.TEXT and p.text.startswith("\u0240") and p.private is None


def test_members_no_entry_of_which_is_held_are_named_for_group_messages(tmp_path):
    from tinyssb import crypto, entry
    store = Store(str(tmp_path / "s.db"))
    me, known, new1, new2 = (crypto.publickey(bytes([i]) * 32) for i in range(1, 5))
    store.add_feed(known)
    au = entry.Author(known, lambda m: crypto.sign(b"\x02" * 32, m))
    seq, pkt, mid, _ = au.next(appmsg.iam("Known"))
    store.append(known, seq, pkt, mid)
    store.add_feed(new2)                   # followed, nothing arrived yet
    assert apphazard.unheard(store, me, [known, new1, me]) == [new1]
    assert apphazard.unheard(store, me, [known, new1, new2, me]) == [new1, new2]
    assert apphazard.unheard(store, me, [known, me]) == []
    assert apphazard.unheard(store, me, [new1, me]) == []     # 1:1: the post tells them
    assert apphazard.unheard(store, me, [me]) == []
    line = apphazard.unheard_warning([new1], {new1: "Nia"})
    assert "Nia" in line and "\n" not in line
    store.close()
