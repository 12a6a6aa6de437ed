from tinyssb import bipf
from tinyssb.errors import WireError

# PyPI bipf README vector (facts of the format, shared by the Python reference).
REF_HEX = ("f50418666f6f8c02127fff0a800a810aff0a000a010a7f12800012007f1a0080000e002179656168"
           "061862616695014046726564686f6c6d4305413da6832fbc3f186261722868656c6c6f1862617a06")
REF_VAL = {"foo": [-129, -128, -127, -1, 0, 1, 127, 128, 32512, 32768, False, b"yeah", None],
           "baf": {"Fredholm": 0.1101000100000001}, "bar": "hello", "baz": None}


def err(fn, *args):
    try:
        fn(*args)
    except WireError as e:
        return e.reason
    return None


def test_reference_vector_decodes():
    assert bipf.decode(bytes.fromhex(REF_HEX)) == REF_VAL


def test_reference_list_encodes_identically():
    # the list part of the vector: bytes 0x0c.. after the "foo" key
    lst = REF_VAL["foo"]
    enc = bipf.encode(lst)
    assert enc.hex() in REF_HEX
    assert bipf.decode(enc) == lst


def test_shortest_signed_int_forms():
    cases = [(0, "0a00"), (1, "0a01"), (127, "0a7f"), (128, "128000"), (200, "12c800"),
             (255, "12ff00"), (-1, "0aff"), (-128, "0a80"), (-129, "127fff"),
             (32767, "12ff7f"), (32768, "1a008000"), (2 ** 31 - 1, "22ffffff7f"),
             (2 ** 31, "2a0000008000")]
    for v, h in cases:
        assert bipf.encode(v).hex() == h, (v, bipf.encode(v).hex())
        assert bipf.decode(bytes.fromhex(h)) == v


def test_esp32_android_unsigned_forms():
    # ESP32/Android write magnitudes without a sign bit: WANT [0, 200] is 24 0a 00 0a c8
    want = bytes.fromhex("240a000ac8")
    assert bipf.decode(want, True) == [0, 200]
    assert bipf.decode(want) == [0, -56]  # what a plain two's-complement reader sees
    # CHNK [[1,5,0],[2,130,3]] as the ESP32 encodes it
    chnk = bytes.fromhex("74" + "340a010a050a00" + "340a020a820a03")
    assert bipf.decode(chnk, True) == [[1, 5, 0], [2, 130, 3]]
    # our own encoding of non-negative values reads the same in both modes
    for v in (0, 127, 128, 200, 255, 40000, 2 ** 32 - 1):
        e = bipf.encode([v])
        assert bipf.decode(e, True) == [v] and bipf.decode(e) == [v]


def test_other_types_roundtrip():
    vals = [None, True, False, "", "h\u00e9llo", b"", b"\x00\xff", 1.5, -0.25, [],
            [1, [2, [3, []]]], {"a": 1, 2: b"x"}, {}]
    for v in vals:
        assert bipf.decode(bipf.encode(v)) == v


def test_varint():
    for n in (0, 1, 127, 128, 300, 2 ** 21, 2 ** 28 - 1):
        e = bipf.varint_encode(n)
        assert bipf.varint_decode(e) == (n, len(e))
    assert bipf.varint_encode(300) == b"\xac\x02"
    assert err(bipf.varint_decode, b"\x80\x80") == "bipf_truncated"
    assert err(bipf.varint_decode, b"\xff\xff\xff\xff\xff\x01") == "bipf_varint_too_long"


def test_malformed_inputs_raise_wire_error():
    assert err(bipf.decode, b"") == "bipf_truncated"
    assert err(bipf.decode, b"\x12\x01") == "bipf_truncated"        # int body cut
    assert err(bipf.decode, b"\x0a\x01\x00") == "bipf_trailing_bytes"
    assert err(bipf.decode, b"\x4a" + bytes(9)) == "bipf_int_too_long"
    assert err(bipf.decode, b"\x0e\x02") == "bipf_bad_boolnone"
    assert err(bipf.decode, b"\x23\x00\x00\x00\x00") == "bipf_bad_double"
    assert err(bipf.decode, b"\x07") == "bipf_reserved_type"
    assert err(bipf.decode, b"\x15\x0a\x01") == "bipf_dict_odd"
    assert err(bipf.decode, b"\x08\xff") == "bipf_bad_utf8"
    # a list used as a dict key
    assert err(bipf.decode, b"\x25\x14\x0a\x01\x06") == "bipf_bad_key"
    # deep nesting is bounded
    deep = b""
    for _ in range(40):
        deep = bipf.varint_encode((len(deep) << 3) | 4) + deep
    assert err(bipf.decode, deep) == "bipf_too_deep"


def test_zero_length_int_reads_as_zero():
    assert bipf.decode(b"\x02") == 0


def test_int_length_matches_encoding():
    for v in (0, 5, 127, 128, 1000, 70000, 2 ** 31):
        assert bipf.int_length(v) == len(bipf.encode(v))
