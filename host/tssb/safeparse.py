"""Parsing outside input (log lines, request bodies, files users are handed) so that its
shape cannot crash us: size and nesting are checked before the standard parser runs (a
line nested 5,000 deep makes `json.loads` raise RecursionError, and values nested a few
hundred deep break whatever walks them later), and values JSON does not have (NaN,
Infinity, numbers too large for a float) are refused. Every failure is one `InputError`
(a ValueError) whose text fits on one line.

    from tssb.safeparse import InputError, json_loads, toml_loads
    rec = json_loads(line, max_bytes=16384)        # raises InputError

Event-log lines (the JSONL schema of tinyssb.eventlog, written by our hosts and boards and
read by `tssb web`, `tssb logs`, the bridge and the delivery recorder) have their own
bounds: `event_record(line)`; `Lines` splits a byte stream into lines of bounded length.
"""
import json
import math
import re

MAX_DEPTH = 32           # nesting of arrays/objects/tables: our formats need 4 at most
MAX_BYTES = 1 << 20      # default size bound of one document
EVENT_LINE_MAX = 16 * 1024   # bytes of one event line (the schema's lines are < 1 KiB)
EVENT_DEPTH = 8              # event objects are flat; a few levels for future fields

# Strings are skipped whole (brackets inside them do not nest); an unterminated one only
# makes the count too high, and the parser refuses such a document anyway.
_JSON_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)
_TOML_TOKENS = re.compile(r'"""(?:[^"\\]|\\.|"(?!""))*"""|\'\'\'.*?\'\'\'|'
                          r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"|\'[^\'\n]*\'|#[^\n]*|[\[\]{}]', re.S)


class InputError(ValueError):
    """Outside input we refuse; str() is one line saying why."""


def nesting_depth(text, tokens=_JSON_TOKENS, stop=None):
    """Deepest nesting of [ ] and { } in `text` outside strings (stops counting past
    `stop`)."""
    depth = deepest = 0
    for m in tokens.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if stop is not None and deepest > stop:
                    break
        elif c in "]}":
            depth -= 1
    return deepest


def _text(data, max_bytes, what):
    if len(data) > max_bytes:
        raise InputError("%s too large: %d bytes, at most %d" % (what, len(data), max_bytes))
    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError("%s is not UTF-8 text (byte %d)" % (what, e.start))
    return data


def _finite(text):
    v = float(text)
    if not math.isfinite(v):
        raise ValueError("number out of range: %s" % text[:20])
    return v


def _no_constant(name):
    raise ValueError("%s is not a JSON value" % name)


def json_loads(data, max_bytes=MAX_BYTES, max_depth=MAX_DEPTH, what="JSON"):
    """json.loads for outside input (str or UTF-8 bytes).

    Raises:
        InputError: too large, not UTF-8, nested deeper than max_depth, not JSON, or
            holding NaN/Infinity or a number too large for a float.
    """
    text = _text(data, max_bytes, what)
    if nesting_depth(text, _JSON_TOKENS, max_depth) > max_depth:
        raise InputError("%s nested deeper than %d levels" % (what, max_depth))
    try:
        return json.loads(text, parse_float=_finite, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:
        raise InputError("not %s: %s" % (what, one_line(e)))


def toml_loads(data, max_bytes=MAX_BYTES, max_depth=MAX_DEPTH, what="TOML"):
    """tomllib.loads for outside input (str or UTF-8 bytes), the same checks as json_loads
    (NaN and infinities refused, integers of at most 4300 digits).

    Raises:
        InputError.
    """
    import tomllib
    text = _text(data, max_bytes, what)
    if nesting_depth(text, _TOML_TOKENS, max_depth) > max_depth:
        raise InputError("%s nested deeper than %d levels" % (what, max_depth))
    try:
        return tomllib.loads(text, parse_float=_finite)
    except (ValueError, RecursionError) as e:     # TOMLDecodeError is a ValueError
        raise InputError("bad %s: %s" % (what, one_line(e)))


def one_line(e):
    """An exception's text on one line of at most 200 characters."""
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def event_record(line, what="event line"):
    """The object of one event-log line (str or UTF-8 bytes): a JSON object whose "event"
    is a string, of at most EVENT_LINE_MAX bytes, nested at most EVENT_DEPTH deep.

    Raises:
        InputError: anything else (one line saying why).
    """
    rec = json_loads(line, EVENT_LINE_MAX, EVENT_DEPTH, what)
    if not isinstance(rec, dict):
        raise InputError("%s is not a JSON object" % what)
    if not isinstance(rec.get("event"), str):
        raise InputError("%s has no \"event\" name" % what)
    return rec


class Lines:
    """Splits a byte stream into its lines (without the newline; blank ones left out),
    holding at most `max_len` bytes of a line: `feed(data)` returns the lines completed,
    a longer line as None (once), its bytes dropped as they come.

    Args:
        max_len: longest line kept.
        cut: True when the stream starts inside a line (read from an offset): that first
            piece is dropped.
    """

    def __init__(self, max_len=EVENT_LINE_MAX, cut=False):
        self.max_len = max_len
        self.partial = b""
        self.skipping = cut      # dropping the rest of a line up to its newline

    def feed(self, data):
        parts = (self.partial + data).split(b"\n")
        self.partial = parts.pop()
        out = []
        for p in parts:
            if self.skipping:
                self.skipping = False
            elif len(p) > self.max_len:
                out.append(None)
            elif p.strip():
                out.append(p)
        if len(self.partial) > self.max_len:
            if not self.skipping:
                out.append(None)
            self.partial = b""
            self.skipping = True
        return out
