# The USB serial link framing (tinyssb.link); runs under pytest and tools/mptest.py.
from tinyssb import link
from tinyssb.hotloops import crc32
from support import Rand


def _pkt(r, n=120):
    return r.bytes(n)


def _all_messages(r):
    p = _pkt(r)
    return [
        (link.hello("host", "h1", fid="ab"), ("hello", {"v": 1, "role": "host", "name": "h1",
                                                         "fid": "ab"})),
        (link.rx(p, -120, -37), ("rx", p, -120, -37)),
        (link.tx(p[:40]), ("tx", p[:40])),
        (link.status_request(7), ("status", 7, None)),
        (link.status_reply(7, {"feeds": 3}), ("status", 7, {"feeds": 3})),
        (link.config_get(9, "plan"), ("cfg_get", 9, "plan")),
        (link.config_set(10, "plan", "eu868"), ("cfg_set", 10, "plan", "eu868")),
        (link.reply(10, {"ok": True}), ("reply", 10, {"ok": True})),
        (link.event('{"v":1}'), ("event", '{"v":1}')),
        (link.time_sync(3, 1735689600000), ("time", 3, 1735689600000)),
        (link.error(0, "unknown command"), ("error", 0, "unknown command")),
        (link.command(4, "info"), ("cmd", 4, "info", [])),
        (link.command(5, "config_set_many", {"sf": 9}), ("cmd", 5, "config_set_many",
                                                         [{"sf": 9}])),
    ]


def test_roundtrip_every_type():
    r = Rand(1)
    d = link.Decoder()
    for frame, want in _all_messages(r):
        assert frame[0] == link.FEND and frame[-1] == link.FEND
        got = d.feed(frame)
        assert got == [want], (got, want)
    assert d.counters == {}


def test_escaping_of_fend_and_fesc():
    pkt = bytes([0xC0, 0xDB, 0xC0, 0xDB]) * 2 + bytes([0xDC, 0xDD])
    f = link.tx(pkt)
    inner = f[1:-1]
    assert 0xC0 not in inner
    assert link.Decoder().feed(f) == [("tx", pkt)]


def test_byte_by_byte_and_joined_frames():
    r = Rand(2)
    frames = [link.tx(_pkt(r, 8 + i)) for i in range(20)]
    d = link.Decoder()
    got = []
    for b in b"".join(frames):
        got.extend(d.feed(bytes([b])))
    assert [m[1] for m in got] == [link.Decoder().feed(f)[0][1] for f in frames]
    assert len(got) == 20


def test_bad_crc_dropped_and_counted():
    f = bytearray(link.tx(bytes(range(30))))
    f[5] ^= 0x01
    d = link.Decoder()
    assert d.feed(bytes(f)) == []
    assert d.counters.get("bad_crc") == 1
    # the next good frame still decodes
    assert d.feed(link.tx(bytes(range(30)))) == [("tx", bytes(range(30)))]


def test_version_and_type_checked():
    def raw_frame(ver, typ, body):
        raw = bytes([ver, typ]) + body
        return link._escape(raw + crc32(raw).to_bytes(4, "big"))
    d = link.Decoder()
    assert d.feed(raw_frame(2, link.TX, bytes(20))) == []
    assert d.counters.get("bad_version") == 1
    assert d.feed(raw_frame(1, 0x7F, bytes(20))) == []
    assert d.counters.get("bad_type") == 1
    assert d.feed(raw_frame(1, link.TX, bytes(7))) == []
    assert d.counters.get("bad_packet_length") == 1
    assert d.feed(raw_frame(1, link.TX, bytes(121))) == []
    assert d.counters.get("bad_packet_length") == 2
    assert d.feed(raw_frame(1, link.CFG_SET, b"\x01[1,2]")) == []
    assert d.counters.get("bad_cfg_set") == 1
    assert d.feed(raw_frame(1, link.TIME, b"\x01\x00")) == []
    assert d.counters.get("bad_time") == 1
    assert d.feed(raw_frame(1, link.HELLO, b"\xff\xfe")) == []
    assert d.counters.get("bad_json") == 1
    assert d.feed(raw_frame(1, link.STATUS, b"")) == []
    assert d.counters.get("missing_rid") == 1
    for body in (b"\x01{}", b"\x01[]", b"\x01[5]", b"\x01\"info\""):
        assert d.feed(raw_frame(1, link.CMD, body)) == []
    assert d.counters.get("bad_cmd") == 4


def test_overlong_frame_bounded_and_resync():
    d = link.Decoder()
    junk = bytes([0x41]) * (link.MAX_FRAME * 3)
    assert d.feed(b"\xc0" + junk) == []
    assert len(d.buf) <= link.MAX_FRAME
    assert d.counters.get("too_long") == 1
    assert d.feed(link.tx(bytes(9))) == [("tx", bytes(9))]


def test_bad_escape_skips_to_next_fend():
    d = link.Decoder()
    assert d.feed(b"\xc0\x01\x03\xdb\x00abc") == []
    assert d.counters.get("bad_escape") == 1
    assert d.feed(link.tx(bytes(12))) == [("tx", bytes(12))]


def test_encoder_refuses_bad_input():
    for fn in (lambda: link.tx(bytes(7)), lambda: link.tx(bytes(121)),
               lambda: link.encode(0x55, b""), lambda: link.encode(link.EVENT, bytes(1025)),
               lambda: link.reply(256, 1), lambda: link.rx(bytes(10), 40000, 0)):
        try:
            fn()
        except link.LinkError:
            continue
        raise AssertionError("no LinkError")


def test_random_garbage_never_raises_and_good_frames_survive():
    r = Rand(5)
    d = link.Decoder()
    sent = []
    stream = bytearray()
    for i in range(60):
        stream.extend(r.bytes(r.below(40)))       # line noise between frames
        p = _pkt(r, 8 + r.below(113))
        sent.append(p)
        stream.extend(link.tx(p))
    got = []
    i = 0
    while i < len(stream):
        n = 1 + r.below(64)
        got.extend(d.feed(bytes(stream[i:i + n])))
        i += n
    pkts = [m[1] for m in got if m[0] == "tx"]
    # every sent frame is delimited by its own FENDs, so noise cannot eat it
    assert pkts == sent
    # and pure garbage decodes to nothing (CRC32 false positives aside) without raising
    for _ in range(20):
        d.feed(r.bytes(500))
