"""The `sync_start` / `sync_done` lines of every host protocol (SETU, trDAG, clock), in the
event schema's terms (spark/tssb_spark/schema/events-v*.json):

  peer    the remote host's Ed25519 key, 64 hex digits: never its address (the address
          is said on stderr and in a command's result)
  mode    a token: [A-Za-z0-9_.:-], at most 40 characters
  reason  why a sync failed, in short stable words ([A-Za-z0-9_.:/ -], 1..120): the
          protocol's own reason token, or the kind of an exception; absent on success

Every producer builds its lines here, so the Spark ingest never quarantines them.
"""
import asyncio
import errno
import re
import socket

MODE_MAX = 40
REASON_MAX = 120
_NOT_MODE = re.compile(r"[^A-Za-z0-9_.:-]+")
_NOT_REASON = re.compile(r"[^A-Za-z0-9_.:/ -]+")
COUNTS = ("rounds", "bytes_sent", "bytes_recv", "msgs_sent", "msgs_recv", "elements_sent",
          "elements_recv", "duration_ms")


def peer_hex(peer):
    """The peer's key as 64 lowercase hex digits, or None when `peer` is no key."""
    if isinstance(peer, (bytes, bytearray, memoryview)) and len(peer) == 32:
        return bytes(peer).hex()
    if isinstance(peer, str) and len(peer) == 64:
        try:
            return bytes.fromhex(peer).hex()
        except ValueError:
            return None
    return None


def mode_token(mode):
    """A mode or profile name as a schema token ("multi(levels=3)" -> "multi-levels-3")."""
    if mode is None:
        return None
    t = _NOT_MODE.sub("-", str(mode)).strip("-")[:MODE_MAX].strip("-")
    return t or None


def reason_of(e):
    """Short stable words for why a sync failed: an exception or a text."""
    if e is None:
        return None
    if isinstance(e, str):
        text = e
    elif getattr(e, "reason", None) and isinstance(e.reason, str):
        text = e.reason            # the protocols' and the session's own tokens
    elif isinstance(e, (KeyboardInterrupt, asyncio.CancelledError)):
        text = "interrupted"
    elif isinstance(e, ConnectionRefusedError):
        text = "connection refused"
    elif isinstance(e, (TimeoutError, asyncio.TimeoutError)):
        text = "timeout"
    elif isinstance(e, socket.gaierror):
        text = "unknown host"
    elif isinstance(e, OSError):
        text = "network: %s" % errno.errorcode.get(e.errno, "error").lower()
    else:
        text = type(e).__name__
    t = " ".join(_NOT_REASON.sub(" ", text).split())[:REASON_MAX].strip()
    return t or "failed"


def start(events, proto, peer):
    """Write sync_start; nothing when `peer` is no key (no session was attempted)."""
    key = peer_hex(peer)
    if events is not None and key is not None:
        events.emit("sync_start", proto=proto, peer=key)


def fields(proto, peer, ok, reason=None, mode=None, **counts):
    """The sync_done fields (None values are left out by the writer)."""
    out = dict(proto=proto, peer=peer_hex(peer), ok=bool(ok), mode=mode_token(mode),
               reason=None if ok else (reason_of(reason) or "failed"))
    for k in COUNTS:
        v = counts.get(k)
        if v is not None:
            out[k] = max(0, v)
    return out


def done(events, proto, peer, ok, reason=None, mode=None, **counts):
    """Write sync_done (see fields); nothing when `peer` is no key. Returns the fields."""
    f = fields(proto, peer, ok, reason, mode, **counts)
    if events is not None and f["peer"] is not None:
        events.emit("sync_done", **f)
    return f
