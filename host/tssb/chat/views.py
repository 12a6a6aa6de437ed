"""Chats as a reader sees them (`tssb read`, the web view): the public chat, private chats by
member set, their titles, and the receipts on our own posts.

A muted author's posts are left out of every chat (they are still stored and relayed);
a blocked author's are gone from the store.
"""
from tssb import posts
from tssb.chat import appmsg, inbox as inboxmod
from tssb.store import MUTE

PUBLIC_SCAN = 256      # newest entries of each feed looked at for the public chat
LOCK = "\U0001f512"    # the app titles private chats "🔒 [names]"


def muted(store):
    return {bytes(r[0]) for r in store.blocked(MUTE)}


def public(store, last=None, scan=PUBLIC_SCAN, keys=None):
    """The public chat: public text posts (TAV and our raw text) of all unmuted feeds,
    oldest first by their time (raw posts, which have none, by feed order), last N."""
    hidden = muted(store)
    out = []
    for fid in store.feeds():
        fid = bytes(fid)
        if fid in hidden:
            continue
        top = store.front(fid)[0]
        for p in posts.feed_posts(store, fid, max(1, top - scan + 1), top):
            if p.kind == posts.TEXT and p.private is None:
                out.append(p)
    out.sort(key=lambda p: (p.ts if isinstance(p.ts, (int, float)) else 0, p.fid, p.seq))
    return out[-last:] if last else out


def private(store, inbox, key, keys, last=None):
    """A private chat's posts (opened with keys), oldest first; muted authors left out."""
    hidden = muted(store)
    out = []
    for fid, seq in inbox.chat_entries(key):
        if bytes(fid) in hidden:
            continue
        p = posts.read(store, bytes(fid), seq, keys)
        if p is not None and p.private == posts.OPEN:
            out.append(p)
    return out[-last:] if last else out


def title(key, me, names):
    """How the app titles a chat: "🔒 [names of the others]", or "Local notes"."""
    if key == inboxmod.PUBLIC:
        return "public"
    others = [m for m in inboxmod.chat_members(key) if m != bytes(me)]
    if not others:
        return "Local notes"
    return "%s [%s]" % (LOCK, ", ".join(posts.author(m, names) for m in others))


def find(inbox, me, members):
    """The chat key of a member set (feed ids besides us), or None if it has no posts."""
    key = inboxmod.chat_key(list(members) + [bytes(me)])
    return key if inbox.chat_entries(key) else None


def ticks(inbox, p, me):
    """Receipts on our own private post p: {"delivered": [fid], "read": [fid]}, or None
    for a post that is not ours or not private."""
    if p.fid != bytes(me) or p.private != posts.OPEN or p.kind != posts.TEXT or \
            p.mid is None or not [m for m in (p.members or ()) if m != bytes(me)]:
        return None      # not ours, not private, or a note to ourselves
    got = inbox.receipts(p.mid, me)
    return {"delivered": got[appmsg.DLV], "read": got[appmsg.ACK]}
