"""The host's own feed: the one writer of its entries, and whether its front is known.

Appends: `append` reads the feed's front and appends the next entry (with its side
chain) in one write transaction (SQLite's BEGIN IMMEDIATE), so any number of processes
of one home (`tssb post`, `dag post`, a running bridge or web view) post one after
another: each signs on top of the entry the previous one stored.

Own-feed safety: a home whose store came from a backup (`tssb store restore`) or whose
identity was imported (`tssb id --import`) may be behind its own feed: entries posted
since elsewhere are not here, and posting now would sign a second entry for a seq that
exists (a fork, which every peer keeps as proof against the key). Such a home is marked
(`mark_unconfirmed`) and `check_front` refuses to post until a peer has confirmed the
front (a completed sync: `confirm`) or the user forces it.
"""
import time

from tinyssb import bipf, entry

UNCONFIRMED = "own_feed_unconfirmed"   # config key: why the front is not known (text)
# The longest post a host accepts (`tssb post`, the web view): 1 MiB, a side chain of
# 10,486 chunks. Hosts fetch and store side chains up to that length (MAX_CHAIN_CHUNKS),
# so every post one host accepts replicates to the others; boards stop at the core's
# tinyssb.replica.MAX_CHAIN_CHUNKS (1000 chunks, ~100 KB), far beyond the airtime any
# post without --force may take.
MAX_POST = 1 << 20


def chain_chunks(length):
    """The side-chain chunks a chain20 post of `length` bytes needs (tinyssb.entry)."""
    head = entry.INLINE - len(bipf.varint_encode(length))
    return max(0, -(-(length - head) // entry.CHUNK_DATA))


MAX_CHAIN_CHUNKS = chain_chunks(MAX_POST)


class FeedBehind(ValueError):
    """Posting now could fork the own feed (see the module doc); the text says why and
    what to do."""


def unconfirmed(store):
    """Why the own feed's front is not known (text), or None when it is."""
    why = store.get_config(UNCONFIRMED)
    if why is None:
        return None
    return why.decode("utf-8", "replace") if isinstance(why, (bytes, bytearray)) else str(why)


def mark_unconfirmed(store, why):
    """Note that the own feed may be behind (`why`: what happened, for the user)."""
    store.set_config(UNCONFIRMED, "%s on %s" % (why, time.strftime("%Y-%m-%d %H:%M")))


def confirm(store):
    """A peer confirmed the front (or the user forced a post). Returns: True if the home
    was marked."""
    if store.get_config(UNCONFIRMED) is None:
        return False
    store.set_config(UNCONFIRMED, None)
    return True


def check_front(store, force=False):
    """Refuse (FeedBehind) to post while the front is not confirmed, unless `force`,
    which clears the mark."""
    why = unconfirmed(store)
    if why is None:
        return
    if not force:
        raise FeedBehind(
            "this home's own feed may be behind (%s): posting now could fork it. Sync "
            "from a peer first (`tssb sync --peer HOST:PORT`), or post with --force if "
            "no other copy of this identity ever posted" % why)
    confirm(store)


def append(store, identity, content, typ=entry.CHAIN20):
    """Append `content` to the own feed of `identity` (object with .public, .sign), on top
    of whatever the store holds now, in one transaction.

    Returns: (seq, number of side-chain chunks).
    Raises: ValueError (content the entry format cannot hold), sqlite3 errors.
    """
    fid = identity.public
    with store.transaction():
        store.add_feed(fid)
        top, prev = store.front(fid)
        author = entry.Author(fid, identity.sign, top, bytes(prev))
        seq, pkt, mid, chunks = author.next(content, typ)
        store.append(fid, seq, pkt, mid)
        store.put_chain(fid, seq, chunks)
    return seq, len(chunks)


def post(ctx, content, force=False):
    """Post `content` on the own feed of ctx's home from a process without a node:
    check_front, append, and the `append` event. Returns: seq.

    Raises: FeedBehind (the front is not confirmed and not `force`), ValueError.
    """
    check_front(ctx.store, force)
    seq, _ = append(ctx.store, ctx.identity, content)
    ctx.events.emit("append", feed=ctx.identity.public, seq=seq, own=True)
    return seq
