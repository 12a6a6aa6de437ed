"""Parsing outside input (log lines, request bodies, files users are handed) so that its
shape cannot crash us: size and nesting are checked before the standard parser runs (a
line nested 5,000 deep makes `json.loads` raise RecursionError, and values nested a few
hundred deep break whatever walks them later), and values JSON does not have (NaN,
Infinity, numbers too large for a float) are refused. Every failure is one `InputError`
(a ValueError) whose text fits on one line.

    from tssb.safeparse import InputError, json_loads, toml_loads
    rec = json_loads(line, max_bytes=16384)        # raises InputError
"""
import json
import math
import re

MAX_DEPTH = 32           # nesting of arrays/objects/tables: our formats need 4 at most
MAX_BYTES = 1 << 20      # default size bound of one document

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
        raise InputError("not %s: %s" % (what, _one_line(e)))


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
        raise InputError("bad %s: %s" % (what, _one_line(e)))


def _one_line(e):
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 200 else text[:197] + "..."
