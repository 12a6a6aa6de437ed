"""Appending to the host's own feed from a process that runs no node.

The next entry is authored from the store's front inside one write transaction (BEGIN
IMMEDIATE), side chain included, so two processes appending at once never reuse a sequence
number and a crash leaves no entry without its chain. A process that runs a node (bridge,
`tssb web --serial`) posts through its node instead, which keeps the node's own view of the
feed in step.
"""
from tinyssb import entry


def append(ctx, content):
    """Append `content` to ctx's own feed. Returns: seq.

    Raises: ValueError (content the chain20 format cannot hold).
    """
    ident, store = ctx.identity, ctx.store
    with store.transaction():
        if not store.has_feed(ident.public):
            store.add_feed(ident.public)
        top, prev = store.front(ident.public)
        au = entry.Author(ident.public, ident.sign, top, bytes(prev))
        seq, pkt, mid, chunks = au.next(content)
        store.append(ident.public, seq, pkt, mid)
        for i, c in enumerate(chunks):
            store.put_chunk(ident.public, seq, i, c)
    ctx.events.emit("append", feed=ident.public.hex(), seq=seq, own=True)
    return seq
