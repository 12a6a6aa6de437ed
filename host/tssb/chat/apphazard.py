"""What the tinySSB Android app throws on, or loses, in what we write: so we never write
it by accident.

Raw content (`tssb post --raw`). The app hands every entry it replicates to
`WebAppInterface.toFrontendObject` twice (`A/tssb/Replica.kt:207-213`): as soon as the
entry is stored, with the bytes after the length varint up to the hash pointer (the first
28 - |varint|, zero padded), and once the side chain is complete with the whole content
(`read_content`, `:376-388`: the last chunk's zero padding kept). That function decodes
the bytes as BIPF (`A/utils/Bipf.kt:350`) and
- opens a top-level byte string as a box (`A/crypto/SSBid.kt:115`): one shorter than its
  nonce and key, 56 bytes, throws IndexOutOfBoundsException (`:117`, `:118`);
- converts a top-level list to JSON (`Bipf.kt:477`): a true or false in it, or in a list
  inside it, throws ClassCastException (`:491`, the value is cast to Int).
The exception leaves the app's receive path: its radio loops have no catch and keep their
lock (docs/interop.md), and the entry stays in its log, so the app's restream throws again.

The app reads a tag the way `Bipf.varint_decode` does (`Bipf.kt:236`): in 32-bit Int
arithmetic, so a five-byte tag (five bytes of non-ASCII text) can come out negative and
announce a body of negative length. Text whose first byte is ASCII with the low bits 001
(TAB, `! ) 1 9 A I Q Y a i q y`) always announces a byte string of 0-15 bytes; a
non-ASCII first byte with those bits (UTF-8 lead bytes C9 D1 D9 E1 E9 F1) does when the
length read over the following bytes is that short or negative. `hazard` runs the app's
decoding on both byte sequences, exactly, and says what throws.

Group messages: the app's page drops a private post one of whose members it has no contact
for, and breaks its chat list for later ones (`W/prod/contacts.js:177`). It makes a contact
of every key its GOSET takes in (`A/tssb/GOset.kt:235-256`): `unheard` names the members
whose feed has probably not reached the mesh, since this home holds no entry of it.
"""
from tinyssb import bipf, entry

from tssb import posts

BOX_HEAD = 56         # nonce and ephemeral key: SSBid.kt:117-118 slice them first
# Nesting bound of this model (the app's recursion has its own, the JVM's stack): content
# that nests app lists deeper is refused as unknown. Text cannot nest more than 15 deep.
MAX_DEPTH = 64
_MASK = 0xFFFFFFFF
_BOOL = "bool"        # a BOOLNONE item with a body: the app keeps a Boolean in it


class _Throws(Exception):
    pass


def _int32(v):
    v &= _MASK
    return v - (1 << 32) if v & 0x80000000 else v


def _varint(buf, pos, end):
    """Bipf.varint_decode: (value as the JVM's Int, bytes it counts as taken)."""
    v, shift, p = 0, 1, pos
    while p < end:
        b = buf[p]
        v |= (b & 0x7F) * shift & _MASK
        if not b & 0x80:
            break
        shift = shift * 128 & _MASK
        p += 1
    return _int32(v), p - pos + 1


def _item(buf, pos, end, depth):
    """Bipf.decode of the item at pos (`Bipf.kt:261-347`): (type, body, bytes taken), or
    None where the app reads nothing. body: the byte string's length, or a list's items.
    Raises: _Throws."""
    tag, n = _varint(buf, pos, end)
    pos += n
    t, sz = tag & 7, tag >> 3
    if pos + sz > end:
        return None
    if t == bipf.BOOLNONE:
        if sz == 0:
            return t, None, n
        if pos >= len(buf):
            raise _Throws("a true/false item past the end (ArrayIndexOutOfBoundsException "
                          "at Bipf.kt:276)")
        return _BOOL, None, n + sz
    if t in (bipf.STRING, bipf.BYTES):
        return t, max(sz, 0), n + sz          # a negative length is taken as given
    if t == bipf.INT:
        return t, None, n + max(sz, 0)
    if t not in (bipf.LIST, bipf.DICT):
        return None
    if depth >= MAX_DEPTH:
        raise _Throws("lists nested deeper than %d (not followed further here)" % MAX_DEPTH)
    items, p, lim = [], pos, pos + sz
    while p < lim:
        got = _item(buf, p, lim, depth + 1)
        if got is None or t == bipf.DICT and len(items) % 2 == 0 and \
                got[0] in (bipf.LIST, bipf.DICT):
            return None
        if got[2] <= 0:
            raise _Throws("an item of negative length from a five-byte tag (its decoder "
                          "steps back: ArrayIndexOutOfBoundsException at Bipf.kt:226, or "
                          "a loop without end)")
        items.append(got)
        p += got[2]
    if t == bipf.DICT and len(items) % 2:
        return None                           # a key without a value
    return t, items, n + p - pos


def _to_json(items):
    """Bipf.bipf_list2JSON: lists inside lists are converted too, dicts are not."""
    for t, body, _ in items:
        if t == _BOOL:
            raise _Throws("a list holding true/false (ClassCastException at Bipf.kt:491)")
        if t == bipf.LIST:
            _to_json(body)


def _front(payload):
    """WebAppInterface.toFrontendObject (`:838-868`) up to its throws."""
    got = _item(payload, 0, len(payload), 0)
    if got is None:
        return
    t, body, _ = got
    if t == bipf.BYTES and body < BOX_HEAD:
        raise _Throws("a box of %d byte%s (IndexOutOfBoundsException at SSBid.kt:%d)"
                      % (body, "" if body == 1 else "s", 117 if body < 24 else 118))
    if t == bipf.LIST:
        _to_json(body)


def payloads(content):
    """The two byte strings the app decodes for a chain20 entry holding `content` (how
    every host post is written): the inline bytes as the entry arrives, and the whole
    content once its side chain is complete."""
    content = bytes(content)
    head = entry.INLINE - len(bipf.varint_encode(len(content)))
    first = content[:head] + bytes(max(0, head - len(content)))
    if len(content) <= head:
        return first, content
    pad = -(len(content) - head) % entry.CHUNK_DATA
    return first, content + bytes(pad)


def hazard(content):
    """What the Android app throws on in an entry holding `content` ("a box of 12 bytes
    (...)"), or None when it takes it (shows it, or ignores it). Never raises."""
    for payload in payloads(content):
        try:
            _front(payload)
        except _Throws as e:
            return str(e)
    return None


def unheard(store, me, members):
    """Members of a group message (keys) whose feed this store holds no entry of: it has
    probably not reached the others' apps either, and the app's page drops a group post
    with a member it has no contact for. [] for a message to one other member (the
    recipient learns of us from the post itself) or to ourselves."""
    others = [bytes(m) for m in members if bytes(m) != bytes(me)]
    if len(others) < 2:
        return []
    return [m for m in others if not store.has_feed(m) or store.front(m)[0] == 0]


def unheard_warning(unheard, names=None):
    """One line on `unheard` members (names: {fid: name} to show them by)."""
    return ("this home holds no entry from %s: %s probably not reached the other members' "
            "apps either, and the Android app drops a group message with a member it does "
            "not know (docs/chat.md)"
            % (", ".join(posts.author(m, names) for m in unheard),
               "that feed has" if len(unheard) == 1 else "those feeds have"))
