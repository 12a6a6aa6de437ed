"""The app's message lists as we write them (tssb.chat.appmsg) and read them (tssb.posts):
integers both the app's decoder and the Python pub read exactly; what the app writes
(its integer forms, its boxes) read right by us."""
import random

import bipf as pub   # PyPI bipf 0.0.8: the Python pub's BIPF
import nacl.bindings as nb

from appbox import kotlin_body, kotlin_int, seal as app_seal
from tinyssb import bipf
from tssb import posts
from tssb.chat import appmsg, box

TS = 1778385096     # low byte 0xc8: the app reads a 4-byte form of it as TS - 256


def _int_body(enc):
    n = enc[0] >> 3
    assert enc[0] & 7 == bipf.INT and len(enc) == 1 + n
    return enc[1:]


def test_the_app_misreads_a_4_byte_timestamp_and_reads_ours_exactly():
    four = TS.to_bytes(4, "little")
    assert kotlin_int(four) == TS - 256                 # the reference's example
    ours = _int_body(appmsg.encode(TS))
    assert len(ours) == 7 and kotlin_int(ours) == TS
    assert pub.loads(appmsg.encode(TS)) == TS and bipf.decode(appmsg.encode(TS)) == TS


def test_every_int_we_write_reads_exactly_in_the_app_and_the_pub():
    rnd = random.Random(3)
    values = [0, 1, 127, 128, 200, 255, 256, 32767, 32768, 65535, 65536, 2 ** 23 - 1,
              2 ** 23, 2 ** 24 - 1, 2 ** 24, TS, TS + 56, 2 ** 31 - 1]
    values += [rnd.randrange(0, 2 ** 31) for _ in range(3000)]
    for v in values:
        enc = appmsg.encode(v)
        assert kotlin_int(_int_body(enc)) == v, v
        assert pub.loads(enc) == v, v
        assert bipf.decode(enc, unsigned=True) == v, v
        # the shortest body that does it: 4 bytes only when the app reads them right
        assert len(_int_body(enc)) in (len(bipf.encode(v)) - 1, 7), v


def test_tav_lists_are_laid_out_as_the_app_writes_them():
    a, b = bytes(range(32)), bytes(range(1, 33))
    pub_list = pub.loads(appmsg.tav("hi", ts=TS))
    assert pub_list == ["TAV", [], "hi", None, TS]
    priv = pub.loads(appmsg.tav("yo", b"\x01\x02", TS, recipients=[b, a]))
    assert priv == ["TAV", [], "yo", b"\x01\x02", TS, [appmsg.ref(b), appmsg.ref(a)]]
    assert appmsg.ref(a) == "@" + __import__("base64").b64encode(a).decode() + ".ed25519"
    assert appmsg.parse_ref(appmsg.ref(a)) == a and appmsg.parse_ref("@x.ed25519") is None
    assert pub.loads(appmsg.iam("Bob")) == ["IAM", "Bob"]
    mid = bytes(range(20))
    assert pub.loads(appmsg.receipt("DLV", mid)) == ["DLV", appmsg.msg_ref(mid)]
    assert appmsg.msg_ref(mid).endswith("=") and appmsg.parse_msg_ref(appmsg.msg_ref(mid)) == mid
    # non-ASCII text: the length counts UTF-8 bytes, as the app's (the pub counts chars)
    enc = appmsg.tav("h\u00e9", ts=1)
    assert bipf.decode(enc)[2] == "h\u00e9"


def test_members_are_the_others_sorted_by_ref_then_us():
    keys = [nb.crypto_sign_seed_keypair(bytes([i]) * 32)[0] for i in range(1, 6)]
    me = keys[2]
    order = appmsg.members_order(me, [keys[4], keys[0], keys[1], me, keys[0]])
    assert order[-1] == me and len(order) == 4
    assert [appmsg.ref(k) for k in order[:-1]] == sorted(appmsg.ref(k) for k in order[:-1])


def _app_list(items):
    """A BIPF list as the app's encoder writes it (ints in its magnitude form)."""
    body = b""
    for v in items:
        if isinstance(v, int) and not isinstance(v, bool):
            b = kotlin_body(v)
            body += bipf.varint_encode(len(b) << 3 | bipf.INT) + b
        elif isinstance(v, list):
            body += _app_list(v)
        else:
            body += bipf.encode(v)
    return bipf.varint_encode(len(body) << 3 | bipf.LIST) + body


def test_app_written_entries_read_right_whatever_their_int_forms():
    me_pk, me_sk = nb.crypto_sign_seed_keypair(b"\x05" * 32)
    app_pk, _ = nb.crypto_sign_seed_keypair(b"\x06" * 32)
    keys = box.Keys(me_sk)
    for ts in (TS, 3000000000 % 2 ** 31, 200, 40000, 2 ** 23 + 200):
        public = _app_list(["TAV", [], "hi", None, ts])
        p = posts.decode(app_pk, 1, public)
        assert (p.kind, p.text, p.ts, p.private) == ("text", "hi", ts, None)
        plain = _app_list(["TAV", [], "psst", None, ts,
                           [appmsg.ref(me_pk), appmsg.ref(app_pk)]])
        content = bipf.encode(app_seal(plain, [me_pk, app_pk]))
        p = posts.decode(app_pk, 2, content, keys=keys)
        assert (p.kind, p.text, p.ts, p.private) == ("text", "psst", ts, "open")
        assert p.members == sorted([me_pk, app_pk])
    # voice only, with the app's location prefix on another one
    voice = _app_list(["TAV", [], None, b"\xc2codec2", TS, [appmsg.ref(me_pk)]])
    p = posts.decode(app_pk, 3, bipf.encode(app_seal(voice, [me_pk])), keys=keys)
    assert (p.text, p.voice) == ("<voice message>", True)
    loc = _app_list(["TAV", [], "pfx:loc/plus,8FVC9G8F+6X|at the lake", None, TS])
    p = posts.decode(app_pk, 4, loc)
    assert (p.text, p.loc) == ("at the lake", "8FVC9G8F+6X")
    # the app's receipt for our post, boxed to [itself, us]
    mid = bytes(range(20))
    dlv = bipf.encode(app_seal(_app_list(["DLV", appmsg.msg_ref(mid)]), [app_pk, me_pk]))
    p = posts.decode(app_pk, 5, dlv, keys=keys)
    assert (p.kind, p.tag, p.ref, p.private) == ("receipt", "DLV", mid, "open")


def test_a_box_not_for_us_is_sealed_and_shows_no_bytes():
    _, me_sk = nb.crypto_sign_seed_keypair(b"\x05" * 32)
    other, _ = nb.crypto_sign_seed_keypair(b"\x07" * 32)
    content = bipf.encode(app_seal(b"\x00" * 40, [other]))
    p = posts.decode(other, 1, content, keys=box.Keys(me_sk))
    assert (p.kind, p.private, p.text) == ("private", "sealed", "encrypted message")
