"""Reading what feeds say: entry content with its side chain, decoded into posts.

Three producers write into feeds, and a reader meets them all:
- `tssb post --raw TEXT` (and every `tssb post` before the app format): the UTF-8 text
  itself as the content;
- the tinySSB Android app, the Python chat client / pub and `tssb post`/`dm`/`name`: BIPF
  lists whose first element is a short app tag (../shared/reference/tinyssb-apps.md):
      ["TAV", [tips...], text|None, voice|None, unix_s]   Android text and voice
      ["TAV", text, None, unix_s]                         older simplechat form
      ["IAM", alias]                                      the author's display name
      ["DLV"|"ACK", ref, ...]                             delivery / read confirmations
      other tags (KAN, TTT, TRT, DEL, ...)                shown by tag
  A BIPF byte string at the top level is a box (tssb.chat.box): with our keys it is
  opened, and a private TAV inside carries a sixth element, its members' refs.
- our own `tssb dag post`: ["tdag", root, children, depth, text] (tssb.trdag.message).

Everything here is untrusted input from the mesh: decoding never raises on content, and
callers that render posts (terminal, web) must still escape the text they get.
Integers in app lists are read unsigned: the Android app writes non-negative numbers in
the magnitude form (docs/interop.md, BIPF integers).
"""
from tinyssb import bipf, entry
from tinyssb.errors import WireError

from tssb.chat import appmsg, box

# kinds of post
TEXT = "text"          # our plain text post, or an app text message (TAV)
NAME = "name"          # IAM: the author names themself
RECEIPT = "receipt"    # DLV / ACK
APP = "app"            # a BIPF app list with another tag
PRIVATE = "private"    # a box we did not open (not for us, no key given, or damaged)
BINARY = "binary"      # content we cannot read
PARTIAL = "partial"    # the side chain is still incomplete

# what became of a box (Post.private)
SEALED = "sealed"      # not addressed to us (or read without our keys)
OPEN = "open"          # opened with our key
DAMAGED = "damaged"    # a slot opened, the body did not (a box that would crash the app)

MAX_TEXT = 64 * 1024   # longest text handed to a renderer (a side chain may hold 2^28 bytes)
DAG_TAG = "tdag"       # our own application DAGs (`tssb dag post`, tssb.trdag.message)
_APP_TAG_MAX = 8       # app tags are short ASCII words
_MIN_BOX = 16          # a top-level BIPF byte string shorter than a MAC is no box
LOC_PREFIX = "pfx:loc/plus,"   # the app's location prefix: "pfx:loc/plus,<code>|text"


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
        private: None for a public post, else SEALED, OPEN or DAMAGED.
        members: feed ids (bytes) of a private TAV's chat, the author included; else None.
        ref: the message id (20 bytes) a receipt names, else None.
        loc: the app's location code when the text carried one, else None.
        mid: the entry's message id (bytes) when read from a store, else None.
    """
    __slots__ = ("fid", "seq", "kind", "text", "tag", "ts", "tips", "voice", "length", "have",
                 "private", "members", "ref", "loc", "mid")

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
        self.private = None
        self.members = None
        self.ref = None
        self.loc = None
        self.mid = None

    def as_dict(self):
        return {"fid": self.fid.hex(), "seq": self.seq, "kind": self.kind, "text": self.text,
                "tag": self.tag, "ts": self.ts, "tips": self.tips, "voice": self.voice,
                "length": self.length, "have": self.have, "private": self.private,
                "members": None if self.members is None else [m.hex() for m in self.members],
                "ref": None if self.ref is None else self.ref.hex(), "loc": self.loc,
                "mid": None if self.mid is None else self.mid.hex()}


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


def _members(fid, refs):
    """A private TAV's chat: the keys its refs name (bad ones skipped) and its author."""
    out = [fid]
    if isinstance(refs, list):
        for r in refs:
            k = appmsg.parse_ref(r)
            if k is not None and k not in out:
                out.append(k)
    return sorted(out)


def _text(p, text):
    """Set the text, taking the app's location prefix apart."""
    if text.startswith(LOC_PREFIX) and "|" in text:
        loc, _, rest = text[len(LOC_PREFIX):].partition("|")
        if loc and len(loc) <= 32:
            p.loc = loc
            text = rest
    p.text = _clip(text)


def _tav(fid, seq, lst, n, opened):
    # Android: [TAV, tips, text, voice, ts(, refs)]; simplechat: [TAV, text, None, ts]
    refs = None
    if len(lst) >= 5 and isinstance(lst[1], list):
        tips = [t for t in lst[1] if isinstance(t, (str, bytes))]
        text, voice, ts = lst[2], lst[3], lst[4]
        if opened and len(lst) >= 6:
            refs = lst[5]
    elif len(lst) >= 4:
        tips, text, voice, ts = [], lst[1], lst[2], lst[3]
    else:
        return Post(fid, seq, APP, "malformed TAV message", appmsg.TAV, length=n, have=n)
    tips = [t.hex() if isinstance(t, bytes) else t for t in tips]
    if isinstance(text, bytes):
        return Post(fid, seq, PRIVATE, "encrypted message", appmsg.TAV, _num(ts), tips,
                    length=n, have=n)
    if text is not None and not isinstance(text, str):
        return Post(fid, seq, APP, "malformed TAV message", appmsg.TAV, length=n, have=n)
    has_voice = voice is not None
    p = Post(fid, seq, TEXT, "", appmsg.TAV, _num(ts), tips, has_voice, n, n)
    _text(p, text if text is not None else "<voice message>" if has_voice else "")
    if opened:
        p.members = _members(fid, refs)
    return p


def _app(fid, seq, lst, n, opened=False):
    tag = lst[0]
    if tag == appmsg.TAV:
        p = _tav(fid, seq, lst, n, opened)
    elif tag == appmsg.IAM:
        if len(lst) >= 2 and isinstance(lst[1], str):
            p = Post(fid, seq, NAME, _clip(lst[1]), tag, length=n, have=n)
        else:
            p = Post(fid, seq, APP, "malformed IAM", tag, length=n, have=n)
    elif tag in appmsg.RECEIPTS:
        ref = lst[1] if len(lst) >= 2 else None
        mid = appmsg.parse_msg_ref(ref)
        ref = ref.hex() if isinstance(ref, bytes) else ref if isinstance(ref, str) else "?"
        what = "delivered" if tag == appmsg.DLV else "read"
        p = Post(fid, seq, RECEIPT, "%s %s" % (what, _clip(ref)), tag, tips=[ref],
                 length=n, have=n)
        p.ref = mid
    else:
        p = Post(fid, seq, APP, "%s message (%d elements)" % (tag, len(lst)), tag,
                 length=n, have=n)
    if opened:
        p.private = OPEN
    return p


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


def _private(fid, seq, raw, n, keys):
    """A box: opened with `keys` (tssb.chat.box.Keys) when it is addressed to us."""
    opened = box.open_box(raw, keys) if keys is not None else None
    if opened is None:
        p = Post(fid, seq, PRIVATE, "encrypted message", length=n, have=n)
        p.private = SEALED
        return p
    if opened.plain is None:
        p = Post(fid, seq, PRIVATE, "damaged private message: %s" % opened.damaged,
                 length=n, have=n)
        p.private = DAMAGED
        return p
    try:
        v = bipf.decode(opened.plain, unsigned=True)
    except (WireError, ValueError, IndexError):
        v = None
    if isinstance(v, list) and v and _is_tag(v[0]):
        return _app(fid, seq, v, n, opened=True)
    p = Post(fid, seq, BINARY, "private message of %d bytes in no app format"
             % len(opened.plain), length=n, have=n)
    p.private = OPEN
    return p


def decode(fid, seq, content, complete=True, length=None, keys=None):
    """Decode one entry's content into a Post (never raises).

    keys: tssb.chat.box.Keys to open boxes addressed to us, or None (boxes stay sealed).
    """
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
        if isinstance(v, bytes) and len(content) > _MIN_BOX:
            p = _private(fid, seq, v, n, keys)
            if p.private != SEALED or _utf8(content) is None:
                return p
            # UTF-8 throughout: an old raw text post that reads as a byte string (a
            # box's random bytes never are), shown as the text it is
    text = _utf8(content)
    if text is None:
        return Post(fid, seq, BINARY, "%d bytes of binary content" % len(content),
                    length=n, have=n)
    return Post(fid, seq, TEXT, _clip(text), length=n, have=n)


def _utf8(content):
    try:
        return str(content, "utf-8")
    except UnicodeError:
        return None


def read(store, fid, seq, keys=None):
    """The Post at (fid, seq), or None if the entry is absent (keys: see decode)."""
    got = entry_content(store, fid, seq)
    if got is None:
        return None
    content, complete, length = got
    p = decode(bytes(fid), seq, content, complete, length, keys)
    mid = store.mid(fid, seq) if hasattr(store, "mid") else None   # the host store has it
    p.mid = None if mid is None else bytes(mid)
    return p


def feed_posts(store, fid, start=1, stop=None, newest_first=False, limit=None, keys=None):
    """Posts of one feed for seq in [start, stop] (stop: the feed's front), in order."""
    top = store.front(fid)[0]
    stop = top if stop is None else min(stop, top)
    seqs = range(stop, start - 1, -1) if newest_first else range(start, stop + 1)
    out = []
    for s in seqs:
        if limit is not None and len(out) >= limit:
            break
        p = read(store, fid, s, keys)
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


def display_names(store):
    """{fid: name} to show authors by: the names they gave themselves (IAM), and for the
    rest the labels we gave our peers (`tssb peer add --name`)."""
    out = names(store)
    for peer in (store.peers() if hasattr(store, "peers") else ()):
        if peer["name"]:
            out.setdefault(bytes(peer["public"]), peer["name"])
    return out


def author(fid, known=None):
    """How to show an author: its name where known, else the short feed id."""
    fid = bytes(fid)
    short = fid.hex()[:8]
    name = (known or {}).get(fid)
    return "%s (%s)" % (name, short) if name else short
