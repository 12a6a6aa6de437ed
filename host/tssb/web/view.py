"""`WebView`: the web view over one data directory, with or without a bridged board.

Two ways to run (docs/web.md):
- with the bridge in this process (`tssb web --serial [PORT]`): `tssb.bridge.runner.run`
  starts the view with its host node and board port (`start(h, port, sl)`); every
  packet is shown as the node handles it, with its feed, seq and fate; posts go out
  through the node at once; the board's status gives the region plan and its limiter.
- alone on the store (`tssb web`): feeds and posts from SQLite, polled; traffic from the
  board event lines a `tssb bridge` in another process writes to the event log (DMX,
  size, RSSI/SNR: feeds named where the entry is stored); a post is stored and goes out
  when a bridge next runs on this home.
In both, recent host syncs come from the event log (`tssb sync`, `tssb serve`).
Chats (tssb.chat): the public chat and the private chats addressed to us, opened with our
key; posts go out as the Android app's TAV, private ones boxed to their chat's members;
our own posts carry their delivery stages (tssb.chat.delivery) and receipts. Showing a
private post of someone else sends them a read receipt (ACK) when that is switched on.
"""
import asyncio
import logging
import time

from tinyssb import link

from tssb import ownfeed, posts
from tssb.chat import apphazard, appmsg, delivery, inbox as inboxmod, views
from tssb.chat.inbox import Inbox
from tssb.web import server
from tssb.web.eventlog import POLL_S, Follower
from tssb.web.feeds import FeedIndex
from tssb.web.hub import Hub, wall_ms
from tssb.web.traffic import Index, LogClassifier, Tap, handle_board_event

log = logging.getLogger("tssb.web")

DEFAULT_PORT = 8558
FEEDS_TICK_S = 0.1       # how soon a stored entry reaches the feeds view
FEEDS_POLL_S = 2.0       # full re-read of the store (other processes write to it too)
STATUS_S = 1.0           # neighbours / GOSET / airtime pushed at most this often
BOARD_STATUS_S = 5.0     # the board's STATUS (plan, limiter, queue) asked this often
BOARD_TIMEOUT_S = 3.0
TEXT_MAX = 128           # strings from the board or the event log kept at most this long

SYNC_FIELDS = {"proto": str, "peer": str, "ok": bool, "mode": str, "reason": str,
               "rounds": int, "bytes_sent": int, "bytes_recv": int, "msgs_sent": int,
               "msgs_recv": int, "elements_sent": int, "elements_recv": int,
               "duration_ms": float}
STATUS_FIELDS = {"plan": str, "feeds": int, "queue": int, "duty_used_ms": float,
                 "store_used": int, "now_ms": int}


def _typed(rec, fields):
    """The fields of rec that have the type the schema says, strings cut to TEXT_MAX."""
    out = {}
    for k, t in fields.items():
        v = rec.get(k)
        if isinstance(v, bool) != (t is bool):
            continue
        if t is float and isinstance(v, (int, float)):
            out[k] = float(v)
        elif t is int and isinstance(v, int):
            out[k] = v
        elif t is str and isinstance(v, str):
            out[k] = v[:TEXT_MAX]
        elif t is bool and isinstance(v, bool):
            out[k] = v
    return out


def plan_limits(name):
    """The region plan's name, rule and airtime budget, or None for an unknown plan."""
    from tssbfw import regions
    try:
        p = regions.plan(name)
    except ValueError:
        return None
    lim = p["limits"]
    budget = lim["duty_permille"] * lim["window_ms"] // 1000 if lim["duty_permille"] else None
    return {"name": name, "rule": p["rule"], "duty_permille": lim["duty_permille"],
            "window_ms": lim["window_ms"], "budget_ms": budget, "dwell_ms": lim["dwell_ms"],
            "sf": p["sf"], "bw": p["bw"], "freq": p["freq"]}


class WebView:
    """Args:
        ctx: tssb.context.Context.
        bind, port: where to serve (port 0: any free port).
        token: access token (required beyond loopback).
        plan: region plan name for the airtime budget when no board says it.
        say: function(str) for the lines the user sees.
    """

    def __init__(self, ctx, bind="127.0.0.1", port=DEFAULT_PORT, token=None, plan=None,
                 say=print, clock=wall_ms):
        self.ctx = ctx
        self.bind = bind
        self.port = port
        self.token = token
        self.say = say
        self.hub = Hub(clock, goset=self._goset)
        self.index = Index(ctx.store)
        self.inbox = Inbox(ctx.store, ctx.identity)
        self.feeds = FeedIndex(ctx.store, ctx.identity.public, self._missing, clock,
                               self.decorate, self.inbox.keys)
        self.follower = Follower(ctx.events.path, self._log_event)
        self.h = None
        self.board_port = None
        self.sl = None
        self.url = None
        self.runner = None
        self.tasks = []
        self._dirty = set()
        self._backlog = False
        self._rows = LogClassifier(self.index, lambda: self._goset()[1])
        if plan is not None:
            self.hub.board["plan"] = plan_limits(plan)

    # -- lifecycle -------------------------------------------------------------------

    async def start(self, h=None, board_port=None, serial_link=None):
        """Start serving; with the bridge's host node (and board) when given."""
        self.h, self.board_port, self.sl = h, board_port, serial_link
        if h is not None:
            Tap(self.hub, self.index, self._mark).attach(h)
        if board_port is not None:
            sink = board_port.on_event

            def on_event(line):
                if sink is not None:
                    sink(line)
                handle_board_event(self.hub, line)
            board_port.on_event = on_event
        if not self.ctx.store.has_feed(self.ctx.identity.public):
            self.ctx.store.add_feed(self.ctx.identity.public)   # listed and postable at once
        for fid in self.ctx.store.feeds():
            self.index.add_feed(fid)
        self.feeds.refresh()
        self._backlog = True      # the log's recent past: traffic and airtime before us
        try:
            self.follower.poll()
        finally:
            self._backlog = False
        self.runner, guard, port = await server.start(self, self.bind, self.port, self.token)
        host = "[%s]" % self.bind if ":" in self.bind else self.bind
        self.url = "http://%s:%d/" % (host, port) + ("?token=" + self.token if self.token else "")
        self.say("web view on %s" % self.url)
        loops = [self._feeds_loop, self._status_loop, self._log_loop]
        if board_port is not None:
            loops.append(self._board_loop)
        self.tasks = [asyncio.ensure_future(f()) for f in loops]

    async def close(self):
        for t in self.tasks:
            t.cancel()
        self.tasks = []
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None

    async def run_alone(self, duration=None):
        """Serve the store alone until cancelled or `duration` seconds."""
        await self.start()
        try:
            if duration is None:
                await asyncio.Event().wait()
            else:
                await asyncio.sleep(duration)
        finally:
            await self.close()

    # -- what the page gets ----------------------------------------------------------

    def own_fid(self):
        return self.ctx.identity.public.hex()

    def state(self):
        out = self.hub.snapshot()
        out["feeds"] = self.feeds.summaries()
        out["me"] = {"fid": self.own_fid(), "node": self.ctx.events.node}
        out["mode"] = "bridge" if self.h is not None else "alone"
        return out

    def post(self, content):
        """Append to the host's feed; returns seq. Raises ValueError from the node, or
        tssb.ownfeed.FeedBehind (a ValueError) while the own feed may be behind."""
        ownfeed.check_front(self.ctx.store)
        if self.h is not None:
            seq = self.h.post(content)     # the node sends it on with its next claims
        else:
            # no node here (one would read every feed first): straight into the store
            seq = self._append_own(content)
            self.index.add_stored(self.ctx.identity.public, seq)
        self._mark(self.own_fid())
        return seq

    def _append_own(self, content):
        """Author the next entry of our feed straight into the store (no node here: one
        would read every feed first); a bridge on this home sends it on."""
        seq, _ = ownfeed.append(self.ctx.store, self.ctx.identity, content)
        self.ctx.events.emit("append", feed=self.own_fid(), seq=seq, own=True)
        return seq

    # -- chats -----------------------------------------------------------------------

    def names(self):
        return {f: s["name"] for f, s in self.feeds.feeds.items() if s["name"]}

    def chats(self):
        """The public chat and the private ones, newest first, with the sealed count."""
        self.inbox.refresh(inboxmod.SCAN_PER_ROUND)
        names = self.names()
        me = self.ctx.identity.public
        out = [{"key": inboxmod.PUBLIC, "title": "public", "members": [], "posts": None,
                "last_ts": None}]
        for key, n, ts in self.inbox.chats():
            out.append({"key": key, "title": views.title(key, me, names),
                        "members": key.split(","), "posts": n, "last_ts": ts})
        return {"chats": out, "sealed": self.inbox.counts().get(posts.SEALED, 0)}

    def _chat_posts(self, key, limit):
        self.inbox.refresh(inboxmod.SCAN_PER_ROUND)
        if key == inboxmod.PUBLIC:
            return views.public(self.ctx.store, limit)
        if not self.inbox.chat_entries(key):
            raise KeyError(key)
        return views.private(self.ctx.store, self.inbox, key, self.inbox.keys, limit)

    def chat(self, key, limit):
        """A chat's newest posts, oldest first, decorated. Raises: KeyError (no chat)."""
        names = self.names()
        return [self.decorate(p, names) for p in self._chat_posts(key, limit)]

    def read(self, key, limit):
        """The user was shown a chat's newest `limit` posts: read receipts (ACK) for the
        private ones of others. Returns: how many were sent. Raises: KeyError."""
        return len(self.inbox.mark_read(self._chat_posts(key, limit), self.post))

    def dm(self, text, to):
        """Send a private TAV to feed ids `to`; returns (seq, chat key, the members no
        entry of whose feed we hold: see tssb.chat.apphazard.unheard).

        Raises: ValueError (box.BoxError: too many members, a bad key)."""
        me = self.ctx.identity.public
        content, order = appmsg.private_tav(me, to, text)
        seq = self.post(content)
        return seq, inboxmod.chat_key(order), apphazard.unheard(self.ctx.store, me, order)

    def decorate(self, p, names=None):
        """A post as the page gets it: its dict, author, chat, and for our own posts the
        delivery stages seen and the receipts."""
        names = self.names() if names is None else names
        d = p.as_dict()
        d["author"] = posts.author(p.fid, names)
        me = self.ctx.identity.public
        if p.private == posts.OPEN and p.members is not None:
            key = inboxmod.chat_key(p.members + [me])
            d["chat"] = {"key": key, "title": views.title(key, me, names)}
        if bytes(p.fid) == me and p.kind in (posts.TEXT, posts.NAME):
            others = [m for m in (p.members or ()) if m != me]
            since = p.ts * 1000 if isinstance(p.ts, int) else None
            got = delivery.stages(self.ctx.store, self.inbox, me, p.seq, since, others)
            d["stages"] = {k: (v if isinstance(v, (str, bool)) else
                               [posts.author(f, names) for f in v]) for k, v in got.items()}
        return d

    # -- inputs ----------------------------------------------------------------------

    def _goset(self):
        if self.h is not None:
            g = self.h.node.goset
            return g.keys, g.state
        keys = sorted(self.feeds.feeds)
        acc = 0
        for k in keys:
            acc ^= int.from_bytes(k, "big")
        return keys, acc.to_bytes(32, "big")

    def _missing(self, fid):
        if self.h is None:
            return None
        r = self.h.node.replicas.get(bytes(fid))
        return None if r is None else sum(c.n - c.cnr for c in r.chains.values())

    def _mark(self, fid_hex):
        self._dirty.add(bytes.fromhex(fid_hex))

    def _log_event(self, rec):
        ev = rec["event"]
        if ev == "sync_done":
            r = _typed(rec, SYNC_FIELDS)
            r["ts"] = rec["ts"] if isinstance(rec.get("ts"), int) else self.hub.clock()
            self.hub.sync(r)
        elif (self.h is None or self._backlog) and rec.get("node") != self.ctx.events.node:
            # board lines a bridge wrote here: alone, from another process; with the
            # bridge here, only those from before we started (later ones come live)
            handle_board_event(self.hub, rec, rx_row=self._rows)

    # -- loops -----------------------------------------------------------------------

    async def _feeds_loop(self):
        last_full = 0.0
        version = None
        while True:
            await asyncio.sleep(FEEDS_TICK_S)
            now = time.monotonic()
            # another process committed (a post, a sync): look now, not at the next poll
            seen, version = version, self.ctx.store.data_version()
            if now - last_full >= FEEDS_POLL_S or (seen is not None and version != seen):
                last_full = now
                self._dirty.clear()
                changed = self.feeds.refresh()
            elif self._dirty:
                only, self._dirty = self._dirty, set()
                changed = self.feeds.refresh(only)
            else:
                continue
            if changed:
                if self.h is None:     # alone: index what another process stored
                    for s in changed:
                        self.index.add_feed(bytes.fromhex(s["fid"]))
                self.hub.publish("feeds", feeds=changed)

    async def _status_loop(self):
        last = None
        while True:
            await asyncio.sleep(STATUS_S)
            if self.sl is not None:
                self.hub.board["link"] = {
                    "connected": self.sl.connected, "port": self.sl.port,
                    "bytes_in": self.sl.bytes_in, "bytes_out": self.sl.bytes_out,
                    "bad_frames": dict(self.sl.decoder.counters)}
            st = self.hub.snapshot(traffic=False)
            st.pop("syncs")
            now = st.pop("now")
            key = repr(st)
            if key != last:
                last = key
                self.hub.publish("status", now=now, **st)

    async def _log_loop(self):
        while True:
            await asyncio.sleep(POLL_S)
            self.follower.poll()

    async def _board_loop(self):
        port = self.board_port
        while True:
            hello = port.device
            if hello is not None:
                self.hub.board["hello"] = _typed(hello, {"name": str, "fid": str, "board": str,
                                                         "fw": str})
            if hello is not None and self.sl is not None and self.sl.connected:
                try:
                    st = await port.request(link.status_request, BOARD_TIMEOUT_S)
                except (asyncio.TimeoutError, RuntimeError) as e:
                    log.info("board status: %r", e)
                else:
                    if isinstance(st, dict):
                        self.hub.board["status"] = _typed(st, STATUS_FIELDS)
                        name = self.hub.board["status"].get("plan")
                        if name:
                            self.hub.board["plan"] = plan_limits(name)
            await asyncio.sleep(BOARD_STATUS_S)
