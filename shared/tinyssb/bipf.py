"""BIPF (Binary In-Place Format) as used by tinySSB.

Every value is `tag || body` with tag = LEB128 varint of (len(body) << 3 | type).

Integers: we *encode* the shortest two's-complement little-endian body (the form of the
Python reference and PyPI `bipf`, which the C/ESP32 and Kotlin decoders also read
correctly). The ESP32 and Android encoders write the shortest *magnitude* without a sign
bit (200 -> `0a c8`), which a two's-complement reader takes for -56. So decoding has a
mode: `decode(buf, unsigned=True)` reads every integer as unsigned, which is right for
both encoders when the field is non-negative by definition (sequence numbers, indices,
offsets: every integer in WANT and CHNK). See docs/interop.md.

Decoding validates every length against the buffer and bounds nesting depth; any
malformed input raises WireError.
"""
import struct

from tinyssb.errors import WireError

STRING = 0
BYTES = 1
INT = 2
DOUBLE = 3
LIST = 4
DICT = 5
BOOLNONE = 6

MAX_DEPTH = 16      # nesting bound: protects the (small) MicroPython stack from crafted input
MAX_INT_BYTES = 8   # the reference encoders never write wider integers (struct '<q')


def varint_encode(n):
    """Unsigned LEB128 (7 bits per byte, least significant group first)."""
    if n < 0:
        raise ValueError("varint of negative number")
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varint_decode(buf, pos=0, max_bytes=5):
    """Return (value, new_pos). Raises WireError if truncated or longer than max_bytes."""
    val = 0
    shift = 0
    end = len(buf)
    for i in range(max_bytes):
        if pos >= end:
            raise WireError("bipf_truncated")
        b = buf[pos]
        pos += 1
        val |= (b & 0x7F) << shift
        if not b & 0x80:
            return val, pos
        shift += 7
    raise WireError("bipf_varint_too_long")


def _int_size(x):
    # smallest n with -2^(8n-1) <= x < 2^(8n-1)
    m = x if x >= 0 else -x - 1
    n = 1
    while m >= 0x80:
        m >>= 8
        n += 1
    return n


def _int_body(x):
    n = _int_size(x)
    if n > MAX_INT_BYTES:
        raise ValueError("integer too large for BIPF")
    if x < 0:
        x += 1 << (8 * n)
    return x.to_bytes(n, "little")


def _enc(obj, out, depth):
    if depth > MAX_DEPTH:
        raise ValueError("BIPF nesting too deep")
    if obj is None:
        out.append(BOOLNONE)
        return
    if obj is True or obj is False:
        out.append((1 << 3) | BOOLNONE)
        out.append(1 if obj else 0)
        return
    t = type(obj)
    if t is int:
        body = _int_body(obj)
        typ = INT
    elif t is str:
        body = obj.encode("utf-8")
        typ = STRING
    elif t is bytes or t is bytearray or t is memoryview:
        body = bytes(obj)
        typ = BYTES
    elif t is float:
        body = struct.pack("<d", obj)
        typ = DOUBLE
    elif t is list or t is tuple:
        sub = bytearray()
        for x in obj:
            _enc(x, sub, depth + 1)
        body = sub
        typ = LIST
    elif t is dict:
        sub = bytearray()
        for k in obj:
            _enc(k, sub, depth + 1)
            _enc(obj[k], sub, depth + 1)
        body = sub
        typ = DICT
    else:
        raise ValueError("cannot BIPF-encode %s" % t)
    out.extend(varint_encode((len(body) << 3) | typ))
    out.extend(body)


def encode(obj):
    """Encode a Python value (None, bool, int, float, str, bytes, list/tuple, dict)."""
    out = bytearray()
    _enc(obj, out, 0)
    return bytes(out)


def encoding_length(obj):
    return len(encode(obj))


def int_length(x):
    """Bytes an integer takes in BIPF (tag + body); budgets of WANT/CHNK use it."""
    n = _int_size(x)
    return 1 + n  # tag is one byte for bodies up to 15 bytes


def _dec(buf, pos, end, unsigned, depth):
    if depth > MAX_DEPTH:
        raise WireError("bipf_too_deep")
    tag, pos = varint_decode(buf, pos)
    typ = tag & 7
    n = tag >> 3
    stop = pos + n
    if stop > end:
        raise WireError("bipf_truncated")
    if typ == INT:
        if n > MAX_INT_BYTES:
            raise WireError("bipf_int_too_long", n)
        if n == 0:
            return 0, stop  # no reference encoder writes this; read it as 0 rather than fail
        v = int.from_bytes(bytes(buf[pos:stop]), "little")
        if not unsigned and buf[stop - 1] & 0x80:
            v -= 1 << (8 * n)
        return v, stop
    if typ == BYTES:
        return bytes(buf[pos:stop]), stop
    if typ == STRING:
        try:
            return str(bytes(buf[pos:stop]), "utf-8"), stop
        except Exception:
            raise WireError("bipf_bad_utf8")
    if typ == LIST:
        lst = []
        while pos < stop:
            v, pos = _dec(buf, pos, stop, unsigned, depth + 1)
            lst.append(v)
        return lst, stop
    if typ == DICT:
        d = {}
        while pos < stop:
            k, pos = _dec(buf, pos, stop, unsigned, depth + 1)
            if pos >= stop:
                raise WireError("bipf_dict_odd")
            v, pos = _dec(buf, pos, stop, unsigned, depth + 1)
            try:
                d[k] = v
            except TypeError:
                raise WireError("bipf_bad_key")
        return d, stop
    if typ == BOOLNONE:
        if n == 0:
            return None, stop
        if n == 1 and buf[pos] in (0, 1):
            return buf[pos] == 1, stop
        raise WireError("bipf_bad_boolnone")
    if typ == DOUBLE:
        if n != 8:
            raise WireError("bipf_bad_double")
        return struct.unpack("<d", bytes(buf[pos:stop]))[0], stop
    raise WireError("bipf_reserved_type")


def decode(buf, unsigned=False):
    """Decode exactly one BIPF value filling `buf`.

    Args:
        buf: bytes-like.
        unsigned: read integers as unsigned (for fields that are non-negative by definition).
    Raises:
        WireError: truncated, trailing bytes, bad type or length.
    """
    v, pos = _dec(buf, 0, len(buf), unsigned, 0)
    if pos != len(buf):
        raise WireError("bipf_trailing_bytes")
    return v


def decode_prefix(buf, pos=0, unsigned=False):
    """Decode one value starting at pos; return (value, end_pos). Trailing bytes allowed."""
    return _dec(buf, pos, len(buf), unsigned, 0)
