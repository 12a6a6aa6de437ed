"""`tssb read [FEED | --chat WHO]`: what feeds say, decoded (tssb.posts), and chats.

Private posts addressed to us are opened and shown in their chat (the app's grouping by
member set, tssb.chat.inbox); boxes not for us are counted, never shown. Reading a
private post of someone else sends them a read receipt (ACK), and reading catches up on
the delivered receipts (DLV) owed for posts that arrived: both switchable (`tssb
receipts`).
"""
import json
import logging
import sqlite3
import sys
import time

from tssb import feedforks, ownfeed, posts
from tssb.chat import inbox as inboxmod, views
from tssb.chat.inbox import Inbox
from tssb.cli import EXIT_FAILURE, CliError, open_home, resolve_feed

FOLLOW_POLL_S = 0.5   # how often --follow looks for new entries (a bridge writes them)

log = logging.getLogger("tssb.cli")


def register(subparsers):
    p = subparsers.add_parser(
        "read", help="print chats, a feed's posts or a chat, decoded (--follow for new ones)",
        description="Without arguments: the chats, public and private (the Android app's "
                    "grouping of private messages by their members), with counts. With FEED: "
                    "that feed's posts: our text posts, side chains reassembled, and the "
                    "tinySSB Android app's and Python chat client's messages (TAV text and "
                    "voice, IAM names, delivery/read receipts; other app messages by tag); "
                    "private messages addressed to us opened and labelled with their chat, "
                    "others only counted. With --chat: one chat, every member's posts in "
                    "time order, with the receipts others sent for ours. Authors are shown "
                    "by the name they gave themselves (IAM) where known. --follow waits for "
                    "new posts like tail -f (Ctrl-C stops).")
    p.add_argument("feed", metavar="FEED", nargs="?",
                   help="'self', a feed id (hex or @base64.ed25519), a unique prefix of 8+ "
                        "hex digits, or an author's name")
    p.add_argument("--chat", metavar="WHO[,WHO...]",
                   help="a private chat by its other members (names, ids or prefixes, "
                        "comma-separated; 'self' alone: your notes), or 'public'")
    p.add_argument("-n", "--last", type=int, default=20, metavar="N",
                   help="start with the last N posts (default 20; 0 = all)")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new posts")
    p.add_argument("--duration", type=float, metavar="S", help="with --follow: stop after S s")
    p.add_argument("--json", action="store_true", help="one JSON object per post (or chat)")
    p.set_defaults(func=run)


def _when(ts):
    if ts is None:
        return ""
    try:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) + " "
    except (OverflowError, OSError, ValueError):
        return ""


def _printable(text):
    # the text comes from the mesh: no terminal control sequences
    return "".join(c if c.isprintable() or c in "\n\t" else "\ufffd" for c in text)


class Reader:
    """What one `tssb read` shows, and the receipts that showing it sends."""

    def __init__(self, ctx, as_json):
        self.ctx = ctx
        self.me = ctx.identity.public
        self.as_json = as_json
        self.names = posts.display_names(ctx.store)
        self.inbox = Inbox(ctx.store, ctx.identity)
        self.keys = self.inbox.keys
        self.sealed = 0
        self.writable = True
        self.catch_up()

    def write(self, content):
        return ownfeed.post(self.ctx, content)

    def _writing(self, work):
        """Run work() unless the store turned out read-only: then reading goes on without
        indexing new boxes or sending receipts (said once)."""
        if not self.writable:
            return
        try:
            work()
        except ownfeed.FeedBehind as e:
            self.writable = False
            log.warning("no receipts are sent: %s", e)
        except sqlite3.OperationalError as e:
            if "readonly" not in str(e).lower():
                raise
            self.writable = False
            log.warning("read-only store: new private posts are not indexed and no "
                        "receipts are sent")

    def catch_up(self):
        """Index what arrived; send the delivered receipts it is owed."""
        self._writing(lambda: (self.inbox.refresh(), self.inbox.settle(self.write)))

    def show(self, ps, chat_label=True):
        """Print posts (sealed boxes only counted); then ACK the private ones shown."""
        shown = []
        for p in ps:
            if p.kind == posts.PRIVATE and p.private != posts.DAMAGED:
                self.sealed += 1
                continue
            if p.kind == posts.NAME and p.text.strip():
                self.names[bytes(p.fid)] = p.text.strip()   # as posts.names reads it
            self._print(p, chat_label)
            shown.append(p)
        self._writing(lambda: self.inbox.mark_read(shown, self.write))

    def _print(self, p, chat_label):
        ticks = views.ticks(self.inbox, p, self.me)
        key = self.inbox.chat_of(p.fid, p.seq) if p.private == posts.OPEN else None
        if self.as_json:
            d = p.as_dict()
            d["author"] = self.names.get(bytes(p.fid))
            if key is not None:
                d["chat"] = {"key": key, "title": views.title(key, self.me, self.names),
                             "members": key.split(",")}
            if ticks is not None:
                d["receipts"] = {k: [f.hex() for f in v] for k, v in ticks.items()}
            print(json.dumps(d), flush=True)
            return
        head = "#%d %s%s" % (p.seq, _when(p.ts), posts.author(p.fid, self.names))
        if p.kind == posts.TEXT:
            body = _printable(p.text.rstrip("\n"))
            if p.tips:
                body = "(reply) " + body
            if p.voice and not body.startswith("<voice"):
                body += " <+ voice message>"
        elif p.kind == posts.NAME:
            body = "is called %r" % _printable(p.text)
        else:
            body = "[%s]" % _printable(p.text)
        if key is not None and chat_label:
            body = "%s %s" % (_printable(views.title(key, self.me, self.names)), body)
        if ticks is not None:
            body += _tick_text(ticks, self.names)
        print("%s: %s" % (head, body), flush=True)

    def summary(self):
        if not self.sealed:
            return
        if self.as_json:
            print(json.dumps({"summary": {"sealed": self.sealed}}), flush=True)
        else:
            print("(%d private post%s not addressed to us)" % (
                self.sealed, "" if self.sealed == 1 else "s"), flush=True)
        self.sealed = 0


def _tick_text(ticks, names):
    out = []
    if ticks["delivered"]:
        out.append("\u2714 " + ", ".join(posts.author(f, names) for f in ticks["delivered"]))
    if ticks["read"]:
        out.append("\u2714\u2714 " + ", ".join(posts.author(f, names) for f in ticks["read"]))
    return "  [" + "; ".join(out) + "]" if out else "  [not delivered yet]"


def _chat_key(r, text):
    """The chat --chat names: inbox.PUBLIC, or a private chat's key. Raises: CliError."""
    if text.strip().lower() == "public":
        return inboxmod.PUBLIC
    words = [w.strip() for w in text.split(",") if w.strip()]
    if not words:
        raise CliError("--chat wants members (names, ids, prefixes) or 'public'")
    members = []
    for w in words:
        fid = _member(r, w)
        if fid != r.me and fid not in members:
            members.append(fid)
    key = views.find(r.inbox, r.me, members)
    if key is None:
        raise CliError("no private chat with %s yet (start one with `tssb dm`)"
                       % ", ".join(words), EXIT_FAILURE)
    return key


def _member(r, word):
    """A chat member by name, id or prefix: stored feeds first, then the members of our
    chats (a recipient whose feed we never received). Raises: CliError."""
    try:
        return resolve_feed(r.ctx, word, r.names)
    except CliError:
        w = word.lower()
        hits = {m for key, _, _ in r.inbox.chats() for m in inboxmod.chat_members(key)
                if len(w) >= 8 and m.hex().startswith(w)}
        if len(hits) != 1:
            raise
        return hits.pop()


def _list_chats(r):
    store = r.ctx.store
    chats = r.inbox.chats()
    n_public = len(views.public(store))
    sealed = r.inbox.counts().get(posts.SEALED, 0)
    if r.as_json:
        print(json.dumps({"chat": inboxmod.PUBLIC, "title": "public", "posts": n_public}))
        for key, n, ts in chats:
            print(json.dumps({"chat": key, "title": views.title(key, r.me, r.names),
                              "members": key.split(","), "posts": n, "last_ts": ts}))
        if sealed:
            print(json.dumps({"summary": {"sealed": sealed}}))
        return 0
    print("public: %d post%s (tssb read --chat public)" % (n_public, "" if n_public == 1
                                                           else "s"))
    for key, n, ts in chats:
        print("%s: %d post%s%s" % (_printable(views.title(key, r.me, r.names)), n,
                                   "" if n == 1 else "s",
                                   ", last " + _when(ts).strip() if ts else ""))
    if sealed:
        print("(%d private post%s not addressed to us)" % (sealed, "" if sealed == 1 else "s"))
    if chats:
        print("read one with `tssb read --chat NAME[,NAME...]`")
    return 0


def run(args):
    if args.last < 0:
        raise CliError("--last must be 0 or more")
    if args.duration is not None and not (args.follow and args.duration > 0):
        raise CliError("--duration goes with --follow and must be positive")
    if args.feed is not None and args.chat is not None:
        raise CliError("give FEED or --chat, not both")
    ctx = open_home(args)
    try:
        r = Reader(ctx, args.json)
        if args.feed is None and args.chat is None:
            if args.follow:
                raise CliError("--follow needs FEED or --chat")
            return _list_chats(r)
        if args.chat is not None:
            key = _chat_key(r, args.chat)
            if key == inboxmod.PUBLIC:
                first = views.public(ctx.store, args.last or None, keys=r.keys)
                more = _public_feed(r)
            else:
                first = views.private(ctx.store, r.inbox, key, r.keys, args.last or None)
                more = _private_chat(r, key)
            label = False
        else:
            fid = resolve_feed(ctx, args.feed, r.names)
            if not ctx.store.has_feed(fid):
                raise CliError("feed %s is not in this store (see `tssb feeds`)" % fid.hex(), 1)
            for seq in feedforks.of_feed(ctx.store, fid):
                print("tssb: warning: " + feedforks.describe(ctx, fid, seq, r.names),
                      file=sys.stderr)
            top = ctx.store.front(fid)[0]
            start = 1 if not args.last else max(1, top - args.last + 1)
            first = posts.feed_posts(ctx.store, fid, start, top, keys=r.keys)
            if args.follow:
                first = _until_partial(first)
            more = _one_feed(r, fid, first[-1].seq if first else start - 1)
            label = True
            if top == 0 and not args.json and not args.follow:
                print("no posts yet in %s" % fid.hex())
        r.show(first, label)
        r.summary()
        if args.follow:
            _follow(r, args, more, label)
    finally:
        ctx.close()
    return 0


def _until_partial(ps):
    """Posts up to the first whose side chain is incomplete (shown once it is whole)."""
    out = []
    for p in ps:
        if p.kind == posts.PARTIAL:
            break
        out.append(p)
    return out


def _one_feed(r, fid, shown):
    """function() -> the whole posts of FEED after those shown."""
    nxt = [shown + 1]

    def more():
        out = _until_partial(posts.feed_posts(r.ctx.store, fid, nxt[0], keys=r.keys))
        if out:
            nxt[0] = out[-1].seq + 1
        return out
    return more


def _public_feed(r):
    """function() -> public text posts that arrived since (any unmuted feed)."""
    store = r.ctx.store
    fronts = {bytes(f): store.front(f)[0] for f in store.feeds()}

    def more():
        hidden = views.muted(store)
        out = []
        for f in store.feeds():
            f = bytes(f)
            for p in _until_partial(posts.feed_posts(store, f, fronts.get(f, 0) + 1,
                                                     keys=r.keys)):
                fronts[f] = p.seq
                if p.kind == posts.TEXT and p.private is None and f not in hidden:
                    out.append(p)
        out.sort(key=lambda p: (p.ts if isinstance(p.ts, (int, float)) else 0, p.fid, p.seq))
        return out
    return more


def _private_chat(r, key):
    """function() -> posts of a private chat not shown yet (the index finds an entry once
    its side chain is whole)."""
    shown = set(r.inbox.chat_entries(key))

    def more():
        hidden = views.muted(r.ctx.store)
        out = []
        for fid, seq in r.inbox.chat_entries(key):
            if (fid, seq) in shown:
                continue
            shown.add((fid, seq))
            p = posts.read(r.ctx.store, bytes(fid), seq, r.keys)
            if p is not None and bytes(fid) not in hidden:
                out.append(p)
        return out
    return more


def _follow(r, args, more, label):
    """Print what more() finds every FOLLOW_POLL_S until --duration or Ctrl-C."""
    end = None if args.duration is None else time.monotonic() + args.duration
    try:
        while end is None or time.monotonic() < end:
            time.sleep(FOLLOW_POLL_S)
            r.catch_up()
            r.show(more(), label)
            r.summary()
    except KeyboardInterrupt:
        pass         # the way to stop following
