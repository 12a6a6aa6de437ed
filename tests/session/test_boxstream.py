"""Box stream framing: wire format against raw secretbox, split delivery, goodbye,
tamper detection on every byte, bounds, and fuzzing of the reader and frame decoder."""
import nacl.bindings as sodium
import pytest
from hypothesis import given, settings, strategies as st

from tssb.session.boxstream import HEADER_LEN, MAX_BODY, BoxReader, BoxWriter
from tssb.session.errors import ProtocolError
from tssb.session.mux import MAX_FRAGMENT, decode_frame, encode_frame, OPEN, CREDIT, LAST

KEY = bytes(range(32))
NONCE = bytes(range(24))


def test_wire_format_matches_raw_secretbox():
    body = b"tinySSB" * 10
    wire = BoxWriter(KEY, NONCE).seal(body)
    n = int.from_bytes(NONCE, "big")
    boxed = sodium.crypto_secretbox(body, (n + 1).to_bytes(24, "big"), KEY)
    head = sodium.crypto_secretbox(len(body).to_bytes(2, "big") + boxed[:16],
                                   n.to_bytes(24, "big"), KEY)
    assert wire == head + boxed[16:]
    assert len(wire) == HEADER_LEN + len(body)


def test_roundtrip_with_any_split_and_nonce_wrap():
    top = (1 << 192) - 3                       # the counter wraps during this stream
    nonce = top.to_bytes(24, "big")
    w, r = BoxWriter(KEY, nonce), BoxReader(KEY, nonce)
    bodies = [bytes([i]) * (1 + i * 397 % MAX_BODY) for i in range(12)] + [b"x" * MAX_BODY]
    wire = b"".join(w.seal(b) for b in bodies) + w.goodbye()
    got = []
    pos = 0
    step = 1
    while pos < len(wire):
        got += r.feed(wire[pos:pos + step])
        assert r.pending() < HEADER_LEN + MAX_BODY
        pos += step
        step = step * 3 % 5000 + 1
    assert got == bodies and r.closed


def test_goodbye_is_an_encrypted_zero_header_and_closes():
    w, r = BoxWriter(KEY, NONCE), BoxReader(KEY, NONCE)
    bye = w.goodbye()
    assert len(bye) == HEADER_LEN
    assert sodium.crypto_secretbox_open(bye, NONCE, KEY) == bytes(18)
    assert r.feed(bye) == [] and r.closed
    with pytest.raises(ValueError):
        w.seal(b"more")
    with pytest.raises(ProtocolError, match="data after goodbye"):
        r.feed(b"\x00")


def test_every_tampered_byte_is_detected():
    msg = BoxWriter(KEY, NONCE).seal(b"payload bytes")
    for i in range(len(msg)):
        for flip in (0x01, 0x80):
            bad = bytearray(msg)
            bad[i] ^= flip
            r = BoxReader(KEY, NONCE)
            with pytest.raises(ProtocolError) as e:
                r.feed(bytes(bad))
            assert e.value.reason in ("header tampered", "body tampered")
            with pytest.raises(ProtocolError):   # stays failed
                r.feed(b"")


def test_reordered_or_replayed_messages_are_detected():
    w = BoxWriter(KEY, NONCE)
    m1, m2 = w.seal(b"one"), w.seal(b"two")
    with pytest.raises(ProtocolError):
        BoxReader(KEY, NONCE).feed(m2 + m1)
    r = BoxReader(KEY, NONCE)
    assert r.feed(m1) == [b"one"]
    with pytest.raises(ProtocolError):
        r.feed(m1)


def test_writer_rejects_bad_bodies_and_reader_bad_lengths():
    w = BoxWriter(KEY, NONCE)
    with pytest.raises(ValueError):
        w.seal(b"")
    with pytest.raises(ValueError):
        w.seal(b"x" * (MAX_BODY + 1))
    # a correctly encrypted header announcing 4097 bytes
    head = sodium.crypto_secretbox((MAX_BODY + 1).to_bytes(2, "big") + bytes(16), NONCE, KEY)
    with pytest.raises(ProtocolError, match="body length"):
        BoxReader(KEY, NONCE).feed(head)
    head0 = sodium.crypto_secretbox(b"\x00\x00" + b"\x01" * 16, NONCE, KEY)
    with pytest.raises(ProtocolError, match="body length"):
        BoxReader(KEY, NONCE).feed(head0)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.binary(max_size=6000), max_size=6))
def test_fuzz_reader_only_protocol_errors_and_bounded_buffer(chunks):
    r = BoxReader(KEY, NONCE)
    try:
        for c in chunks:
            r.feed(c)
            assert r.pending() < HEADER_LEN + MAX_BODY
    except ProtocolError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=300), max_size=5), st.data())
def test_fuzz_reader_on_mutated_valid_streams(bodies, data):
    w = BoxWriter(KEY, NONCE)
    wire = bytearray(b"".join(w.seal(b) for b in bodies) + w.goodbye())
    i = data.draw(st.integers(0, len(wire) - 1))
    wire[i] ^= data.draw(st.integers(1, 255))
    r = BoxReader(KEY, NONCE)
    with pytest.raises(ProtocolError):
        r.feed(bytes(wire))


def test_frame_codec_roundtrip_and_limits():
    assert decode_frame(encode_frame(OPEN, 3, b"setu")) == (OPEN, 3, "setu")
    assert decode_frame(encode_frame(CREDIT, 65535, (70000).to_bytes(4, "big"))) == \
        (CREDIT, 65535, 70000)
    assert decode_frame(encode_frame(LAST, 1, b"x" * MAX_FRAGMENT))[2] == b"x" * MAX_FRAGMENT
    with pytest.raises(ValueError):
        encode_frame(LAST, 1, b"x" * (MAX_FRAGMENT + 1))
    for bad in (b"", b"\x01\x00", b"\x09\x00\x01", b"\x01\x00\x01", b"\x01\x00\x01" + b"a" * 65,
                b"\x06\x00\x01\x00", b"\x02\x00\x01x", b"\x01\x00\x01\xff"):
        with pytest.raises(ProtocolError):
            decode_frame(bad)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=5000))
def test_fuzz_frame_decoder(body):
    try:
        kind, sid, payload = decode_frame(body)
    except ProtocolError:
        return
    assert 0 <= sid <= 0xFFFF and 1 <= kind <= 7
