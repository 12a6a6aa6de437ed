"""The Android app's message lists, written so that the app and the Python pub read them.

    ["TAV", [tips], text|None, voice|None, unix_s]               public text and voice post
    ["TAV", [tips], text|None, voice|None, unix_s, [refs...]]    the same, private (boxed)
    ["IAM", alias]                                               the author's display name
    ["DLV", msg_ref] / ["ACK", msg_ref]                          delivered / read (boxed)

A ref is "@" + base64(Ed25519 key) + ".ed25519"; a msg_ref is the padded standard base64
of the 20-byte message id of the entry. A private post's refs are the chat's other members
sorted (the app's UI sorts its members) and the author last; the box's slots follow the
same order. A receipt is boxed to [its writer, the post's author], in that order.
(../shared/reference/tinyssb-private-messages.md.)

Integers: BIPF as `tinyssb.bipf` writes it (shortest two's complement, which the Python pub
and the app's decoder both read), except a 4-byte body (2^23 .. 2^31-1: every timestamp of
our time) whose lowest byte has bit 7 set: the app's decoder reads that one 256 too low
(`A/utils/Bipf.kt:296`, its shift counts are masked to 5 bits), so it goes out
zero-extended to 7 bytes, the shortest longer form both decoders read exactly
(docs/interop.md, "Chats with the Android app").
"""
import base64
import binascii
import time

from tinyssb import bipf

from tssb.chat import box
from tssb.context import ssb_id

TAV = "TAV"
IAM = "IAM"
DLV = "DLV"
ACK = "ACK"
RECEIPTS = (DLV, ACK)

# The app's decoder: a 4-byte INT body loses 256 when bit 7 is set (its sign mask is
# 1 shl 39 = 1 shl 7); at 7 bytes the mask is 1 shl 63 = bit 31, clear for any value the
# app's Int holds, and the pub sign-extends a zero top byte: both read it exactly.
APP_BAD_INT_LEN = 4
APP_SAFE_INT_LEN = 7
MSG_ID_LEN = 20
KEY_LEN = 32


def _int(x):
    body = bipf.encode(x)[1:]
    if len(body) == APP_BAD_INT_LEN and x >= 0 and body[0] & 0x80:
        body = x.to_bytes(APP_SAFE_INT_LEN, "little")
    return bipf.varint_encode(len(body) << 3 | bipf.INT) + body


def _enc(v, out):
    if type(v) is int:
        out.append(_int(v))
    elif type(v) in (list, tuple):
        inner = []
        for x in v:
            _enc(x, inner)
        body = b"".join(inner)
        out.append(bipf.varint_encode(len(body) << 3 | bipf.LIST) + body)
    else:
        out.append(bipf.encode(v))


def encode(value):
    """BIPF of an app list (nested lists, str, bytes, None, ints) with the app's int rule."""
    out = []
    _enc(value, out)
    return b"".join(out)


# The app's feed reference "@<base64>.ed25519" of a 32-byte key (the SSB id form).
ref = ssb_id


def parse_ref(text):
    """The 32-byte key a feed ref names, or None (untrusted text: never raises)."""
    if not isinstance(text, str) or not text.startswith("@") or not text.endswith(".ed25519"):
        return None
    try:
        raw = base64.b64decode(text[1:-len(".ed25519")], validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == KEY_LEN else None


def msg_ref(mid):
    """The app's reference to a message: padded standard base64 of its 20-byte MID."""
    return base64.b64encode(bytes(mid)).decode("ascii")


def parse_msg_ref(text):
    """The 20-byte MID a msg ref names, or None."""
    if not isinstance(text, str):
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == MSG_ID_LEN else None


def members_order(me, others):
    """Slot and list order of a private post: the other members sorted by ref (as the
    app's UI sorts its chat members), then ourselves; duplicates dropped."""
    me = bytes(me)
    rest = sorted({bytes(o) for o in others if bytes(o) != me}, key=ref)
    return rest + [me]


def now_s():
    return int(time.time())


def tav(text, voice=None, ts=None, tips=(), recipients=None):
    """A TAV list's BIPF: public, or with `recipients` (keys, in order) private."""
    lst = [TAV, [str(t) for t in tips], text, voice, now_s() if ts is None else ts]
    if recipients is not None:
        lst.append([ref(r) for r in recipients])
    return encode(lst)


def iam(name):
    return encode([IAM, name])


def receipt(tag, mid):
    """["DLV"|"ACK", msg_ref(mid)] (boxed by the caller)."""
    if tag not in RECEIPTS:
        raise ValueError("receipt tag %r" % (tag,))
    return encode([tag, msg_ref(mid)])


def boxed(sealed):
    """A private entry's content: the box as a BIPF bytes object."""
    return bipf.encode(bytes(sealed))


def private_tav(me, others, text, voice=None, ts=None):
    """The entry content of a private TAV from `me` to `others` (keys), as the app writes
    it: members ordered by members_order, boxed to them in that order.

    Returns: (content, members in slot order). Raises: box.BoxError (more than
    box.MAX_RECIPIENTS members with us, or a key that is no curve point).
    """
    order = members_order(me, others)
    if len(order) > box.MAX_RECIPIENTS:
        raise box.BoxError("a private chat holds at most %d members including you (the "
                           "app opens 7 slots), not %d" % (box.MAX_RECIPIENTS, len(order)))
    plain = tav(text, voice, ts, recipients=order)
    return boxed(box.seal(plain, order)), order
