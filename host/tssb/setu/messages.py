"""SETU message wire formats (draft section 6) with strict decoders.

Every message starts with MSG SIZE (u16, network order, header included) and MSG TYPE (u16,
network order). Field byte orders follow GNUnet where it differs from the draft (see
docs/setu.md, Interop): IBF SIZE and IMCS of IBF messages and the IBF keys and sums are
little-endian (GNUnet sends host order), everything else is network order.

`decode(buf)` returns a `Msg` (type plus named fields) or raises SetuError("bad message").
Each encoder returns bytes and never produces more than MAX_MESSAGE_SIZE.
"""
import struct
from array import array

from . import constants as C
from .errors import SetuError

_HDR = struct.Struct(">HH")
_OPREQ = struct.Struct(">I")
_SE = struct.Struct(">BQ")
_FULLREQ = struct.Struct(">III")
_ELEM = struct.Struct(">HHH")
_FULLELEM = struct.Struct(">HHHH")
_APP = struct.Struct(">BBBI")

APP_VERSION = 1
FLAG_FORCE_FULL = 1
FLAG_FORCE_DIFF = 2


class Msg:
    """A decoded message: `.type` plus per-type attributes (see the decoders)."""

    def __init__(self, mtype, **fields):
        self.type = mtype
        self.__dict__.update(fields)

    def __repr__(self):
        return "Msg(%s)" % C.MSG_NAMES.get(self.type, self.type)


def _frame(mtype, body):
    size = C.HEADER_SIZE + len(body)
    if size > C.MAX_MESSAGE_SIZE:
        raise ValueError("message too large")
    return _HDR.pack(size, mtype) + body


def _bad(detail):
    return SetuError("bad message", detail)


# -- encoders ----------------------------------------------------------------------------

def app_data(profile_id, flags, avg_element_size):
    """Our OPERATION_REQUEST application data: version, profile, flags, average element size."""
    return _APP.pack(APP_VERSION, profile_id, flags, min(avg_element_size, 0xFFFFFFFF))


def operation_request(element_count, app_id, appdata=b""):
    if len(app_id) != C.HASH_SIZE:
        raise ValueError("app id must be 64 bytes")
    return _frame(C.MSG_OPERATION_REQUEST, _OPREQ.pack(element_count) + app_id + appdata)


def strata(se_count, set_size, blob, compressed):
    return _frame(C.MSG_SEC if compressed else C.MSG_SE, _SE.pack(se_count, set_size) + blob)


def ibf_slice(last, ibf_size, offset, salt, bits, payload):
    hdr = struct.pack("<I", ibf_size) + struct.pack(">IH", offset, salt) + struct.pack("<H", bits)
    return _frame(C.MSG_IBF_LAST if last else C.MSG_IBF, hdr + payload)


def element(etype, data):
    return _frame(C.MSG_ELEMENTS, _ELEM.pack(etype, 0, len(data)) + data)


def full_element(etype, data):
    return _frame(C.MSG_FULL_ELEMENT, _FULLELEM.pack(etype, 0, len(data), etype) + data)


def hashes(mtype, hs):
    """OFFER or DEMAND carrying one or more 64-byte hashes."""
    return _frame(mtype, b"".join(hs))


def inquiry(salt, keys):
    a = array("Q", keys)
    if array("H", [1]).tobytes() != b"\x01\x00":
        a.byteswap()
    return _frame(C.MSG_INQUIRY, struct.pack(">I", salt) + a.tobytes())


def done(mtype, checksum):
    return _frame(mtype, checksum)


def full_request(mtype, remote_diff, remote_size, local_diff):
    return _frame(mtype, _FULLREQ.pack(remote_diff, remote_size, local_diff))


MAX_HASHES_PER_MESSAGE = (C.MAX_MESSAGE_SIZE - C.HEADER_SIZE) // C.HASH_SIZE
MAX_KEYS_PER_INQUIRY = (C.MAX_MESSAGE_SIZE - C.INQUIRY_MSG_HEADER) // C.KEY_SIZE


# -- decoders ----------------------------------------------------------------------------

def decode(buf):
    """Parse one message.

    Args:
        buf: the whole message (bytes-like).
    Returns:
        Msg with `.type` and type-specific fields.
    Raises:
        SetuError("bad message") on any length, size-field or layout violation.
    """
    buf = bytes(buf)
    if len(buf) < C.HEADER_SIZE:
        raise _bad("short header")
    if len(buf) > C.MAX_MESSAGE_SIZE:
        raise _bad("oversized")
    size, mtype = _HDR.unpack_from(buf)
    if size != len(buf):
        raise _bad("size field %d != length %d" % (size, len(buf)))
    body = buf[C.HEADER_SIZE:]
    fn = _DECODERS.get(mtype)
    if fn is None:
        raise _bad("unknown type %d" % mtype)
    return fn(mtype, body)


def _d_opreq(t, b):
    if len(b) < 4 + C.HASH_SIZE:
        raise _bad("operation request too short")
    if len(b) > 4 + C.HASH_SIZE + C.MAX_APP_DATA:
        raise _bad("application data too long")
    (count,) = _OPREQ.unpack_from(b)
    app = b[4 + C.HASH_SIZE:]
    fields = dict(element_count=count, app_id=b[4:4 + C.HASH_SIZE], app_data=app,
                  profile=C.PROFILE_GNUNET, flags=0, avg_element_size=0)
    if app:
        if len(app) != _APP.size:
            raise _bad("application data length")
        ver, prof, flags, avg = _APP.unpack(app)
        if ver != APP_VERSION or flags & ~(FLAG_FORCE_FULL | FLAG_FORCE_DIFF) \
                or flags == FLAG_FORCE_FULL | FLAG_FORCE_DIFF:
            raise _bad("application data fields")
        fields.update(profile=prof, flags=flags, avg_element_size=avg)
    return Msg(t, **fields)


def _d_se(t, b):
    if len(b) < _SE.size:
        raise _bad("strata estimator too short")
    sec, setsize = _SE.unpack_from(b)
    if sec not in C.VALID_SE_COUNTS:
        raise _bad("estimator count %d" % sec)
    return Msg(t, se_count=sec, set_size=setsize, blob=b[_SE.size:], compressed=(t == C.MSG_SEC))


def _d_ibf(t, b):
    if len(b) < 12:
        raise _bad("ibf header too short")
    (size,) = struct.unpack_from("<I", b, 0)
    offset, salt = struct.unpack_from(">IH", b, 4)
    (bits,) = struct.unpack_from("<H", b, 10)
    if not 1 <= bits <= 64:
        raise _bad("counter bit length %d" % bits)
    if offset >= size:
        raise _bad("offset beyond IBF size")
    if len(b) == 12:
        raise _bad("empty ibf slice")
    return Msg(t, ibf_size=size, offset=offset, salt=salt, bits=bits, payload=b[12:],
               last=(t == C.MSG_IBF_LAST))


def _d_elem(t, b):
    if len(b) < _ELEM.size:
        raise _bad("element too short")
    etype, pad, esize = _ELEM.unpack_from(b)
    if pad != 0 or esize != len(b) - _ELEM.size:
        raise _bad("element size/padding")
    return Msg(t, etype=etype, data=b[_ELEM.size:])


def _d_fullelem(t, b):
    if len(b) < _FULLELEM.size:
        raise _bad("full element too short")
    etype, pad, esize, aetype = _FULLELEM.unpack_from(b)
    if pad != 0 or esize != len(b) - _FULLELEM.size:
        raise _bad("full element size/padding")
    return Msg(t, etype=etype, aetype=aetype, data=b[_FULLELEM.size:])


def _d_hashes(t, b):
    if not b or len(b) % C.HASH_SIZE:
        raise _bad("hash list length %d" % len(b))
    return Msg(t, hashes=[b[i:i + C.HASH_SIZE] for i in range(0, len(b), C.HASH_SIZE)])


def _d_inquiry(t, b):
    if len(b) < 4 + C.KEY_SIZE or (len(b) - 4) % C.KEY_SIZE:
        raise _bad("inquiry length %d" % len(b))
    (salt,) = struct.unpack_from(">I", b)
    keys = [int.from_bytes(b[i:i + 8], "little") for i in range(4, len(b), 8)]
    return Msg(t, salt=salt, keys=keys)


def _d_done(t, b):
    if len(b) != C.HASH_SIZE:
        raise _bad("done length %d" % len(b))
    return Msg(t, checksum=b)


def _d_fullreq(t, b):
    if len(b) != _FULLREQ.size:
        raise _bad("full request length %d" % len(b))
    rd, rs, ld = _FULLREQ.unpack(b)
    return Msg(t, remote_diff=rd, remote_size=rs, local_diff=ld)


_DECODERS = {
    C.MSG_OPERATION_REQUEST: _d_opreq, C.MSG_SE: _d_se, C.MSG_SEC: _d_se,
    C.MSG_IBF: _d_ibf, C.MSG_IBF_LAST: _d_ibf, C.MSG_ELEMENTS: _d_elem,
    C.MSG_FULL_ELEMENT: _d_fullelem, C.MSG_OFFER: _d_hashes, C.MSG_DEMAND: _d_hashes,
    C.MSG_INQUIRY: _d_inquiry, C.MSG_DONE: _d_done, C.MSG_FULL_DONE: _d_done,
    C.MSG_REQUEST_FULL: _d_fullreq, C.MSG_SEND_FULL: _d_fullreq,
}
