"""The USB serial link between a board and a host: KISS framing, CRC32, versioned messages.

One frame on the wire (KISS, as tinySSB's serial links use it):

    FEND | escape(VER | TYPE | BODY | CRC32(VER|TYPE|BODY), big-endian) | FEND

FEND 0xC0 delimits frames; inside, 0xC0 is sent as FESC TFEND (0xDB 0xDC) and 0xDB as
FESC TFESC (0xDB 0xDD). VER is LINK_VERSION. Message types and their bodies:

  HELLO    0x01  JSON object {"v", "role": "host"|"device", "name", ...}
  RX       0x02  rssi int16 BE (dBm) | snr int16 BE (0.25 dB) | tinySSB packet (8..120)
  TX       0x03  tinySSB packet (8..120): host -> device: send it; device -> host: sent
  STATUS   0x04  rid | (request: empty; reply: JSON object)
  CFG_GET  0x05  rid | key (UTF-8, empty = all)
  CFG_SET  0x06  rid | JSON [key, value]
  REPLY    0x07  rid | JSON value (result of CFG_GET/CFG_SET/TIME)
  EVENT    0x08  one JSONL event-log line (UTF-8, shared schema)
  TIME     0x09  rid | epoch milliseconds uint64 BE (host -> device time sync)
  ERROR    0x0A  rid | reason (UTF-8)
  CMD      0x0B  rid | JSON [op, arg, ...]: a board command by name (info, reboot, ...),
                 answered by REPLY or ERROR

rid is a one-byte request id the reply repeats (0 = unsolicited). The decoder never raises:
garbage, bad CRCs, unknown versions/types and overlong frames are dropped and counted in
`Decoder.counters` by reason, and it resynchronises at the next FEND.

MicroPython-compatible (no typing, no dataclasses).
"""
import json

from tinyssb.errors import WireError
from tinyssb.hotloops import crc32

FEND = 0xC0
FESC = 0xDB
TFEND = 0xDC
TFESC = 0xDD

LINK_VERSION = 1

HELLO = 0x01
RX = 0x02
TX = 0x03
STATUS = 0x04
CFG_GET = 0x05
CFG_SET = 0x06
REPLY = 0x07
EVENT = 0x08
TIME = 0x09
ERROR = 0x0A
CMD = 0x0B

NAMES = {HELLO: "hello", RX: "rx", TX: "tx", STATUS: "status", CFG_GET: "cfg_get",
         CFG_SET: "cfg_set", REPLY: "reply", EVENT: "event", TIME: "time", ERROR: "error",
         CMD: "cmd"}

# Largest body: an event line or a status reply. Event lines of the shared schema are a
# few hundred bytes; 1024 leaves room and keeps the board's receive buffer small.
MAX_BODY = 1024
# Unescaped frame limit: version + type + body + CRC.
MAX_FRAME = 2 + MAX_BODY + 4
MIN_FRAME = 2 + 4
# tinySSB packets: 8..120 bytes (tinyssb-wire.md: DMX 7 + at least one byte; 120-byte entries).
MIN_PKT = 8
MAX_PKT = 120


class LinkError(WireError):
    """A malformed link frame or message; `.reason` says which check failed."""


# -- encoding ------------------------------------------------------------------------------

def _escape(raw):
    out = bytearray()
    out.append(FEND)
    for b in raw:
        if b == FEND:
            out.append(FESC)
            out.append(TFEND)
        elif b == FESC:
            out.append(FESC)
            out.append(TFESC)
        else:
            out.append(b)
    out.append(FEND)
    return bytes(out)


def encode(mtype, body=b""):
    """Frame one message.

    Args:
        mtype: message type (HELLO..ERROR).
        body: the type's body bytes.
    Returns:
        the KISS frame bytes, FEND at both ends.
    Raises:
        LinkError: unknown type or body longer than MAX_BODY.
    """
    if mtype not in NAMES:
        raise LinkError("bad_type", mtype)
    if len(body) > MAX_BODY:
        raise LinkError("body_too_long", len(body))
    raw = bytes([LINK_VERSION, mtype]) + bytes(body)
    return _escape(raw + crc32(raw).to_bytes(4, "big"))


def _check_pkt(pkt):
    if not MIN_PKT <= len(pkt) <= MAX_PKT:
        raise LinkError("bad_packet_length", len(pkt))
    return bytes(pkt)


def _json(obj):
    return json.dumps(obj).encode()


def _rid(rid):
    if not 0 <= rid <= 255:
        raise LinkError("bad_rid", rid)
    return bytes([rid])


def hello(role, name, **extra):
    """HELLO frame; `extra` adds fields (e.g. fid, fw, board)."""
    d = {"v": LINK_VERSION, "role": role, "name": name}
    for k in extra:
        d[k] = extra[k]
    return encode(HELLO, _json(d))


def rx(pkt, rssi=0, snr_q=0):
    """RX frame: a packet heard on air with its RSSI (dBm) and SNR (quarter dB)."""
    if not -32768 <= rssi <= 32767 or not -32768 <= snr_q <= 32767:
        raise LinkError("bad_signal")
    return encode(RX, (rssi & 0xFFFF).to_bytes(2, "big") + (snr_q & 0xFFFF).to_bytes(2, "big")
                  + _check_pkt(pkt))


def tx(pkt):
    """TX frame: a packet to send (host to device) or sent (device to host)."""
    return encode(TX, _check_pkt(pkt))


def status_request(rid):
    return encode(STATUS, _rid(rid))


def status_reply(rid, obj):
    return encode(STATUS, _rid(rid) + _json(obj))


def config_get(rid, key=""):
    return encode(CFG_GET, _rid(rid) + key.encode())


def config_set(rid, key, value):
    return encode(CFG_SET, _rid(rid) + _json([key, value]))


def reply(rid, value):
    return encode(REPLY, _rid(rid) + _json(value))


def event(line):
    return encode(EVENT, line.encode() if isinstance(line, str) else bytes(line))


def time_sync(rid, epoch_ms):
    if not 0 <= epoch_ms < (1 << 64):
        raise LinkError("bad_time")
    return encode(TIME, _rid(rid) + epoch_ms.to_bytes(8, "big"))


def error(rid, reason):
    return encode(ERROR, _rid(rid) + reason.encode()[:MAX_BODY - 1])


def command(rid, op, *args):
    """CMD frame: run the board command `op` with JSON-able `args`."""
    return encode(CMD, _rid(rid) + _json([op] + list(args)))


# -- decoding ------------------------------------------------------------------------------

def _s16(b):
    v = (b[0] << 8) | b[1]
    return v - 65536 if v >= 32768 else v


def _load_json(b):
    try:
        return json.loads(bytes(b).decode())
    except (ValueError, UnicodeError):
        raise LinkError("bad_json")


def _text(b):
    try:
        return bytes(b).decode()
    except UnicodeError:
        raise LinkError("bad_utf8")


def parse(raw):
    """Check and decode one unescaped frame (between FENDs).

    Returns:
        a tuple whose first item is the type name:
        ("hello", dict) ("rx", pkt, rssi, snr_q) ("tx", pkt) ("status", rid, dict|None)
        ("cfg_get", rid, key) ("cfg_set", rid, key, value) ("reply", rid, value)
        ("event", line) ("time", rid, epoch_ms) ("error", rid, reason)
        ("cmd", rid, op, [args])
    Raises:
        LinkError: too_short, too_long, bad_crc, bad_version, bad_type and per-type reasons.
    """
    n = len(raw)
    if n < MIN_FRAME:
        raise LinkError("too_short", n)
    if n > MAX_FRAME:
        raise LinkError("too_long", n)
    if crc32(raw[:n - 4]) != int.from_bytes(bytes(raw[n - 4:]), "big"):
        raise LinkError("bad_crc")
    if raw[0] != LINK_VERSION:
        raise LinkError("bad_version", raw[0])
    t = raw[1]
    body = bytes(raw[2:n - 4])
    if t == TX:
        return ("tx", _check_pkt(body))
    if t == RX:
        if len(body) < 4:
            raise LinkError("bad_rx")
        return ("rx", _check_pkt(body[4:]), _s16(body[0:2]), _s16(body[2:4]))
    if t == EVENT:
        return ("event", _text(body))
    if t == HELLO:
        d = _load_json(body)
        if not isinstance(d, dict):
            raise LinkError("bad_hello")
        return ("hello", d)
    if t not in NAMES:
        raise LinkError("bad_type", t)
    if len(body) < 1:
        raise LinkError("missing_rid")
    rid = body[0]
    rest = body[1:]
    if t == STATUS:
        if not rest:
            return ("status", rid, None)
        d = _load_json(rest)
        if not isinstance(d, dict):
            raise LinkError("bad_status")
        return ("status", rid, d)
    if t == CFG_GET:
        return ("cfg_get", rid, _text(rest))
    if t == CFG_SET:
        kv = _load_json(rest)
        if not isinstance(kv, list) or len(kv) != 2 or not isinstance(kv[0], str):
            raise LinkError("bad_cfg_set")
        return ("cfg_set", rid, kv[0], kv[1])
    if t == REPLY:
        return ("reply", rid, _load_json(rest))
    if t == TIME:
        if len(rest) != 8:
            raise LinkError("bad_time")
        return ("time", rid, int.from_bytes(rest, "big"))
    if t == CMD:
        c = _load_json(rest)
        if not isinstance(c, list) or not c or not isinstance(c[0], str):
            raise LinkError("bad_cmd")
        return ("cmd", rid, c[0], c[1:])
    return ("error", rid, _text(rest))


class Decoder:
    """Streaming KISS decoder with a bounded buffer.

    `feed(data)` returns the messages completed by `data` (tuples as `parse` returns).
    It never raises on input: a bad frame is dropped and counted under its reason in
    `counters` ("too_long" when a frame outgrows MAX_FRAME: the rest up to the next FEND
    is skipped; "bad_escape" for FESC followed by anything but TFEND/TFESC).
    """

    def __init__(self, max_frame=MAX_FRAME):
        self.max_frame = max_frame
        self.buf = bytearray()
        self.esc = False
        self.skip = False     # inside an overlong or broken frame: wait for FEND
        self.counters = {}
        self.frames = 0

    def _count(self, reason):
        self.counters[reason] = self.counters.get(reason, 0) + 1

    def _end(self, out):
        if self.skip:
            self.skip = False
        elif self.buf:
            try:
                out.append(parse(self.buf))
                self.frames += 1
            except LinkError as e:
                self._count(e.reason)
            except Exception:  # a decoder bug must not take the link down
                self._count("internal_error")
        self.buf = bytearray()
        self.esc = False

    def feed(self, data):
        """Consume bytes; return the list of decoded messages (possibly empty)."""
        out = []
        buf = self.buf
        for b in data:
            if b == FEND:
                self._end(out)
                buf = self.buf
                continue
            if self.skip:
                continue
            if self.esc:
                self.esc = False
                if b == TFEND:
                    b = FEND
                elif b == TFESC:
                    b = FESC
                else:
                    self._count("bad_escape")
                    self.skip = True
                    buf = self.buf = bytearray()
                    continue
            elif b == FESC:
                self.esc = True
                continue
            if len(buf) >= self.max_frame:
                self._count("too_long")
                self.skip = True
                buf = self.buf = bytearray()
                continue
            buf.append(b)
        return out
