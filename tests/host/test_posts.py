"""Decoding posts: our text, the Android app's and simplechat's BIPF formats, side chains."""
from tinyssb import bipf, crypto, entry
from tinyssb.store import MemStore
from tssb import posts


def _feed(contents, typ=entry.CHAIN20, keep_chunks=None):
    """A MemStore with one feed holding `contents` (bytes each); returns (store, fid)."""
    seed = bytes(range(32))
    fid = crypto.publickey(seed)
    store = MemStore()
    store.add_feed(fid)
    author = entry.Author(fid, lambda m: crypto.sign(seed, m))
    for c in contents:
        seq, pkt, mid, chunks = author.next(c, typ)
        store.append(fid, seq, pkt, mid)
        for i, ch in enumerate(chunks[:keep_chunks] if keep_chunks is not None else chunks):
            store.put_chunk(fid, seq, i, ch)
    return store, fid


def _magnitude_int(v):
    """BIPF INT as the Android app writes it: minimal magnitude bytes, no sign bit."""
    body = v.to_bytes(max(1, (v.bit_length() + 7) // 8), "little")
    return bipf.varint_encode(len(body) << 3 | bipf.INT) + body


def test_our_text_posts_short_and_side_chained():
    long = ("line %d " * 60 % tuple(range(60))).encode()
    store, fid = _feed([b"hello mesh", long])
    p1, p2 = posts.feed_posts(store, fid)
    assert (p1.kind, p1.text, p1.tag, p1.seq) == ("text", "hello mesh", None, 1)
    assert p2.kind == "text" and p2.text == long.decode() and p2.length == len(long) > 400
    newest = posts.feed_posts(store, fid, newest_first=True, limit=1)
    assert [p.seq for p in newest] == [2]


def test_incomplete_side_chain_is_partial():
    store, fid = _feed([b"x" * 350], keep_chunks=1)
    p = posts.read(store, fid, 1)
    assert p.kind == "partial" and p.length == 350 and 0 < p.have < 350
    assert "incomplete" in p.text


def test_android_tav_with_magnitude_timestamp_and_tips():
    ts = 3000000000  # high bit set: a two's-complement reader would see a negative time
    tip = "%" + "ab" * 10
    body = bipf.encode("TAV") + bipf.encode([tip]) + bipf.encode("hi from android") + \
        bipf.encode(None) + _magnitude_int(ts)
    content = bipf.varint_encode(len(body) << 3 | bipf.LIST) + body
    store, fid = _feed([content])
    p = posts.read(store, fid, 1)
    assert (p.kind, p.tag, p.text, p.ts, p.tips, p.voice) == (
        "text", "TAV", "hi from android", ts, [tip], False)


def test_simplechat_tav_voice_iam_receipts_and_other_apps():
    items = [
        bipf.encode(["TAV", "old form", None, 1690000000]),
        bipf.encode(["TAV", [], None, b"\x01\x02codec2", 1690000001]),
        bipf.encode(["IAM", "Alice"]),
        bipf.encode(["DLV", "%" + "cd" * 10]),
        bipf.encode(["KAN", "board", "add", 3]),
        bipf.encode(b"\x00" * 40),                       # a box: private
        bipf.encode(["TAV", [], b"sealed" * 8, None, 1]),  # private TAV text
        bytes([0xFF, 0xFE, 0x80, 0x00, 0x81]),              # not UTF-8, not BIPF
        bipf.encode(["TAV", 1]),                            # malformed app list
    ]
    store, fid = _feed(items)
    got = [(p.kind, p.tag, p.text) for p in posts.feed_posts(store, fid)]
    assert got[0] == ("text", "TAV", "old form")
    assert got[1] == ("text", "TAV", "<voice message>")
    assert got[2] == ("name", "IAM", "Alice")
    assert got[3][0] == "receipt" and got[3][2].startswith("delivered %")
    assert got[4] == ("app", "KAN", "KAN message (4 elements)")
    assert got[5][0] == "private" and got[6][0] == "private"
    assert got[7][0] == "binary"
    assert got[8][0] == "app" and "malformed" in got[8][2]
    assert posts.names(store) == {fid: "Alice"}
    assert posts.author(fid, posts.names(store)) == "Alice (%s)" % fid.hex()[:8]
    assert posts.author(fid) == fid.hex()[:8]


def test_plain48_text_and_app_list_with_trailing_zero_byte():
    app = bipf.encode(["IAM", "Bob"])
    lst = bipf.encode(["KAN", 0])            # ends in a zero byte (INT 0)
    store, fid = _feed([b"short text", app, lst], typ=entry.PLAIN48)
    p1, p2, p3 = posts.feed_posts(store, fid)
    assert (p1.kind, p1.text) == ("text", "short text")
    assert (p2.kind, p2.text) == ("name", "Bob")
    assert (p3.kind, p3.tag) == ("app", "KAN")


def test_text_that_looks_like_a_bipf_string_stays_text():
    # 'h' (0x68) is a BIPF STRING tag of length 13: decodable, but not an app list
    store, fid = _feed([b"hi there, 13b", b"hi"], typ=entry.PLAIN48)
    assert [p.text for p in posts.feed_posts(store, fid)] == ["hi there, 13b", "hi"]


def test_untrusted_content_never_raises():
    import random
    rnd = random.Random(7)
    fid = bytes(32)
    for _ in range(2000):
        blob = rnd.randbytes(rnd.randrange(0, 60))
        p = posts.decode(fid, 1, blob)
        assert p.kind in ("text", "name", "receipt", "app", "private", "binary")
        assert isinstance(p.text, str)
    big = bipf.encode(["TAV", [], "x" * (posts.MAX_TEXT + 10), None, 1])
    assert len(posts.decode(fid, 1, big).text) == posts.MAX_TEXT + 1
