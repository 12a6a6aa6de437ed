"""Reading what feeds say: entry content with its side chain, decoded into posts.

Three producers write into feeds, and a reader meets them all:
- our own `tssb post TEXT`: the UTF-8 text itself as the content;
- the tinySSB Android app and the Python chat client / pub: BIPF lists whose first element
  is a short app tag (../shared/reference/tinyssb-apps.md):
      ["TAV", [tips...], text|None, voice|None, unix_s]   Android text and voice
      ["TAV", text, None, unix_s]                         older simplechat form
      ["IAM", alias]                                      the author's display name
      ["DLV"|"ACK", ref, ...]                             delivery / read confirmations
      other tags (KAN, TTT, TRT, DEL, ...)                shown by tag
  A BIPF byte string at the top level is a private post (a box we cannot open here).
- our own `tssb dag post`: ["tdag", root, children, depth, text] (tssb.trdag.message).

Everything here is untrusted input from the mesh: decoding never raises on content, and
callers that render posts (terminal, web) must still escape the text they get.
Integers in app lists are read unsigned: the Android app writes non-negative numbers in
the magnitude form (docs/interop.md, BIPF integers).
"""
from tinyssb import bipf, entry
from tinyssb.errors import WireError

# kinds of post
TEXT = "text"          # our plain text post, or an app text message (TAV)
NAME = "name"          # IAM: the author names themself
RECEIPT = "receipt"    # DLV / ACK
APP = "app"            # a BIPF app list with another tag
PRIVATE = "private"    # encrypted to recipients
BINARY = "binary"      # content we cannot read
PARTIAL = "partial"    # the side chain is still incomplete

MAX_TEXT = 64 * 1024   # longest text handed to a renderer (a side chain may hold 2^28 bytes)
DAG_TAG = "tdag"       # our own application DAGs (`tssb dag post`, tssb.trdag.message)
_APP_TAG_MAX = 8       # app tags are short ASCII words


class Post:
    """One decoded entry.

    Attributes:
        fid, seq: where it is.  kind: one of the kinds above.
        text: what to show (str; for VOICE/APP/PRIVATE a short description), never None.
        tag: the app tag ("TAV", "IAM", ...) or None for our plain posts.
        ts: the author's claimed unix time in seconds (app posts), or None.
        tips: message ids it replies to (TAV), as given.
        voice: True when the post carries a voice message.
        length: content bytes announced; have: bytes present (less when PARTIAL).
    """
    __slots__ = ("fid", "seq", "kind", "text", "tag", "ts", "tips", "voice", "length", "have")

    def __init__(self, fid, seq, kind, text, tag=None, ts=None, tips=(), voice=False,
                 length=0, have=0):
        self.fid = fid
        self.seq = seq
        self.kind = kind
        self.text = text
        self.tag = tag
        self.ts = ts
        self.tips = list(tips)
        self.voice = voice
        self.length = length
        self.have = have

    def as_dict(self):
        return {"fid": self.fid.hex(), "seq": self.seq, "kind": self.kind, "text": self.text,
                "tag": self.tag, "ts": self.ts, "tips": self.tips, "voice": self.voice,
                "length": self.length, "have": self.have}


def entry_content(store, fid, seq):
    """(content bytes, complete?, announced length) of entry `seq`, or None if absent.

    Side-chain chunks are taken in order while present; a gap ends the content there.
    """
    pkt = store.entry(fid, seq)
    if pkt is None:
        return None
    if pkt[7] != entry.CHAIN20:
        return _plain48(bytes(pkt[8:56])), True, 48
    try:
        info = entry.chain_info(pkt)
    except WireError:
        return b"", False, 0
    chunks = []
    for cnr in range(info.n_chunks):
        c = store.chunk(fid, seq, cnr)
        if c is None:
            break
        chunks.append(c)
    return entry.content(pkt, chunks), len(chunks) == info.n_chunks, info.length


def _plain48(payload):
    """plain48 has no length: an app list followed by zero padding keeps its own end
    (it may end in a zero byte), anything else loses the trailing zeros."""
    try:
        v, end = bipf.decode_prefix(payload, 0, True)
    except (WireError, ValueError, IndexError):
        v, end = None, -1
    if isinstance(v, list) and v and _is_tag(v[0]) and not any(payload[end:]):
        return payload[:end]
    return payload.rstrip(b"\x00")


def _clip(s):
    return s if len(s) <= MAX_TEXT else s[:MAX_TEXT] + "\u2026"


def _num(v):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return v


def _app(fid, seq, lst, n):
    tag = lst[0]
    if tag == "TAV":
        # Android: [TAV, tips, text, voice, ts]; simplechat: [TAV, text, None, ts]
        if len(lst) >= 5 and isinstance(lst[1], list):
            tips = [t for t in lst[1] if isinstance(t, (str, bytes))]
            text, voice, ts = lst[2], lst[3], lst[4]
        elif len(lst) >= 4:
            tips, text, voice, ts = [], lst[1], lst[2], lst[3]
        else:
            return Post(fid, seq, APP, "malformed TAV message", tag, length=n, have=n)
        tips = [t.hex() if isinstance(t, bytes) else t for t in tips]
        if isinstance(text, bytes):
            return Post(fid, seq, PRIVATE, "encrypted message", tag, _num(ts), tips,
                        length=n, have=n)
        if text is not None and not isinstance(text, str):
            return Post(fid, seq, APP, "malformed TAV message", tag, length=n, have=n)
        has_voice = voice is not None
        if text is None:
            text = "<voice message>" if has_voice else ""
        return Post(fid, seq, TEXT, _clip(text), tag, _num(ts), tips, has_voice, n, n)
    if tag == "IAM":
        if len(lst) >= 2 and isinstance(lst[1], str):
            return Post(fid, seq, NAME, _clip(lst[1]), tag, length=n, have=n)
        return Post(fid, seq, APP, "malformed IAM", tag, length=n, have=n)
    if tag in ("DLV", "ACK"):
        ref = lst[1] if len(lst) >= 2 else None
        ref = ref.hex() if isinstance(ref, bytes) else ref if isinstance(ref, str) else "?"
        what = "delivered" if tag == "DLV" else "read"
        return Post(fid, seq, RECEIPT, "%s %s" % (what, ref), tag, tips=[ref], length=n, have=n)
    return Post(fid, seq, APP, "%s message (%d elements)" % (tag, len(lst)), tag,
                length=n, have=n)


def _dag(fid, seq, lst, n):
    """A trDAG message (tssb.trdag.message: ["tdag", root, children, depth, text])."""
    root, text = lst[1], lst[4]
    if not isinstance(text, str) or not (root is None or isinstance(root, bytes)):
        return Post(fid, seq, APP, "malformed DAG message", DAG_TAG, length=n, have=n)
    if root is None:
        what = "new DAG: %s" % text
    else:
        what = "in DAG %s: %s" % (root.hex()[:16], text)
    return Post(fid, seq, APP, _clip(what), DAG_TAG, tips=[root.hex()] if root else [],
                length=n, have=n)


def _is_tag(v):
    return isinstance(v, str) and 0 < len(v) <= _APP_TAG_MAX and v.isalpha() and v.isupper()


def decode(fid, seq, content, complete=True, length=None):
    """Decode one entry's content into a Post (never raises)."""
    n = len(content) if length is None else length
    if not complete:
        return Post(fid, seq, PARTIAL, "side chain incomplete (%d of %d bytes)" % (
            len(content), n), length=n, have=len(content))
    try:
        v = bipf.decode(content, unsigned=True)
    except (WireError, ValueError, IndexError):
        v = None
    else:
        if isinstance(v, list) and v and _is_tag(v[0]):
            return _app(fid, seq, v, n)
        if isinstance(v, list) and len(v) == 5 and v[0] == DAG_TAG:
            return _dag(fid, seq, v, n)
        if isinstance(v, bytes) and len(content) > 16:
            return Post(fid, seq, PRIVATE, "encrypted message", length=n, have=n)
    try:
        text = str(content, "utf-8")
    except UnicodeError:
        return Post(fid, seq, BINARY, "%d bytes of binary content" % len(content),
                    length=n, have=n)
    return Post(fid, seq, TEXT, _clip(text), length=n, have=n)


def read(store, fid, seq):
    """The Post at (fid, seq), or None if the entry is absent."""
    got = entry_content(store, fid, seq)
    if got is None:
        return None
    content, complete, length = got
    return decode(bytes(fid), seq, content, complete, length)


def feed_posts(store, fid, start=1, stop=None, newest_first=False, limit=None):
    """Posts of one feed for seq in [start, stop] (stop: the feed's front), in order."""
    top = store.front(fid)[0]
    stop = top if stop is None else min(stop, top)
    seqs = range(stop, start - 1, -1) if newest_first else range(start, stop + 1)
    out = []
    for s in seqs:
        if limit is not None and len(out) >= limit:
            break
        p = read(store, fid, s)
        if p is not None:
            out.append(p)
    return out


def names(store, fids=None):
    """{fid: display name} from each feed's latest IAM post (feeds without one omitted)."""
    out = {}
    for fid in (store.feeds() if fids is None else fids):
        top = store.front(fid)[0]
        for s in range(top, 0, -1):
            p = read(store, fid, s)
            if p is not None and p.kind == NAME and p.text.strip():
                out[bytes(fid)] = p.text.strip()
                break
    return out


def author(fid, known=None):
    """How to show an author: its name where known, else the short feed id."""
    fid = bytes(fid)
    short = fid.hex()[:8]
    name = (known or {}).get(fid)
    return "%s (%s)" % (name, short) if name else short
