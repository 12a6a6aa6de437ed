"""Event log writer: one JSON object per line, schema `tssb-events` (spark/tssb_spark/schema).

Every producer (firmware via the bridge, simulator, host sessions) writes through EventLog,
so every line carries the envelope the Spark ingest needs:

  "v"      schema version: the lowest version that describes the line (1, or 2 when a
           v2-only field such as freq_khz is present), so older ingests keep accepting it
  "id"     "<node>:<run>:<counter>": unique across producers and restarts (the run id
           differs per boot/run); the ingest dedupes on it, so re-ingest adds nothing
  "ts"     integer milliseconds since the Unix epoch, UTC. A simulator maps its virtual
           clock onto an epoch base (VIRTUAL_EPOCH_MS + virtual ms); a board without a
           wall clock lets the bridge stamp its lines.
  "node"   the producer's node name ([A-Za-z0-9._-], 1..64)
  "event"  one of EVENTS, then the event's fields (None values are left out; bytes are
           written as lowercase hex)

EVENTS mirrors the schema file (a CPython test checks they agree). Runs on MicroPython:
no typing, no dataclasses, no re.
"""
import json
from hashlib import sha256

try:
    from binascii import hexlify
except ImportError:  # pragma: no cover - every supported port has binascii
    hexlify = None

SCHEMA_VERSION = 2  # newest version this writer knows
# 2025-01-01T00:00:00Z: the base a simulator adds to its virtual clock, so "ts" is always
# epoch milliseconds and partitions by date stay meaningful.
VIRTUAL_EPOCH_MS = 1735689600000

ENVELOPE = ("v", "id", "ts", "node", "event")
# event -> (required fields, optional fields); schema events-v2.json.
EVENTS = {
    "tx": (("kind", "length", "airtime_ms"), ("dmx", "pkt", "freq_khz")),
    "rx": (("kind", "length"), ("dmx", "pkt", "rssi", "snr", "airtime_ms", "src", "freq_khz")),
    "drop": (("reason",), ("length",)),
    "append": (("feed", "seq"), ("origin_ts", "own")),
    "chunk": (("feed", "seq", "cnr"), ()),
    "goset": (("count", "state"), ()),
    "want": (("n",), ()),
    "duty_wait": (("wait_ms",), ()),
    "store_full": (("feed",), ()),
    "sync_start": (("proto", "peer"), ()),
    "sync_done": (("proto", "peer", "ok"),
                  ("mode", "rounds", "bytes_sent", "bytes_recv", "msgs_sent", "msgs_recv",
                   "elements_sent", "elements_recv", "duration_ms", "reason")),
}
# Fields that exist only from schema v2 on.
V2_FIELDS = ("freq_khz",)

# `pkt` on tx/rx: the first 8 bytes of SHA-256 of the packet as sent (without the radio
# CRC), so a receiver's rx names the same packet as the sender's tx (docs/events.md).
PKT_ID_LEN = 8

NODE_MAX = 64
_NODE_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"


def valid_node(name):
    """True when `name` is a node name the schema accepts (also safe as a path part)."""
    if not isinstance(name, str) or not 0 < len(name) <= NODE_MAX:
        return False
    for c in name:
        if c not in _NODE_CHARS:
            return False
    return True


def _hex(b):
    return hexlify(bytes(b)).decode()


def packet_id(pkt):
    """Returns: the `pkt` field of a packet (bytes without CRC): 16 lowercase hex digits."""
    return _hex(sha256(bytes(pkt)).digest()[:PKT_ID_LEN])


def _run_id():
    # A fresh id per boot/run keeps "id" unique when the counter restarts at 1.
    try:
        import os
        return _hex(os.urandom(4))
    except (ImportError, AttributeError, NotImplementedError):
        import time
        return "%x" % (time.ticks_ms() if hasattr(time, "ticks_ms") else int(time.time() * 1000))


def line_writer(stream):
    """Return a write_line function that writes each line plus "\\n" to `stream`."""
    def write(line):
        stream.write(line + "\n")
    return write


class EventLog:
    """Builds event lines and hands each to `write_line(str)` (no trailing newline).

    Args:
      node: node name ([A-Za-z0-9._-], 1..64 characters).
      write_line: callable taking one line (str, without newline).
      clock: callable returning integer milliseconds since the Unix epoch.
      run: run/boot id (default: 8 random hex digits).
    Raises:
      ValueError: bad node name or run id.
    """

    def __init__(self, node, write_line, clock, run=None):
        if not valid_node(node):
            raise ValueError("bad node name")
        if run is None:
            run = _run_id()
        if not valid_node(run) or len(run) > 32:
            raise ValueError("bad run id")
        self.node = node
        self.run = run
        self._write = write_line
        self._clock = clock
        self.count = 0

    def emit(self, event, **fields):
        """Write one event line.

        Args:
          event: event name, a key of EVENTS.
          **fields: the event's fields; None values are omitted, bytes become hex.
        Returns:
          The event id written.
        Raises:
          ValueError: unknown event, unknown field or missing required field (a
            producer bug: the ingest would quarantine the line).
        """
        spec = EVENTS.get(event)
        if spec is None:
            raise ValueError("unknown event " + str(event))
        required, optional = spec
        rec = {}
        version = 1
        for k in fields:
            v = fields[k]
            if v is None:
                continue
            if k not in required and k not in optional:
                raise ValueError("field %s not in event %s" % (k, event))
            if isinstance(v, (bytes, bytearray, memoryview)):
                v = _hex(v)
            if k in V2_FIELDS:
                version = 2
            rec[k] = v
        for k in required:
            if k not in rec:
                raise ValueError("event %s needs field %s" % (event, k))
        self.count += 1
        eid = "%s:%s:%d" % (self.node, self.run, self.count)
        rec["v"] = version
        rec["id"] = eid
        rec["ts"] = int(self._clock())
        rec["node"] = self.node
        rec["event"] = event
        self._write(json.dumps(rec))
        return eid
