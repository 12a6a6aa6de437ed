"""What a long-running process on a home (`tssb bridge`, `tssb web`) does for chats.

Every ROUND_S: index the private posts that arrived (tssb.chat.inbox), send the DLV they
are owed, and drop feeds blocked meanwhile by another process (`tssb block`) from the
node's GOSET. With a host node, our own entries are posted through it, so the node's view
of our feed stays right; without one (the web view alone) straight into the store. The
same process records what becomes of our posts (tssb.chat.delivery.Recorder) when it has
a node.
"""
import asyncio
import logging
import sqlite3

from tssb import ownfeed
from tssb.chat.delivery import Recorder
from tssb.chat.inbox import SCAN_PER_ROUND, Inbox
from tssb.store import BLOCK

log = logging.getLogger("tssb.chat")

ROUND_S = 2.0     # a DLV follows its post's arrival within this (plus the write)


class Service:
    """Args:
        ctx: tssb.context.Context.  hostnode: the process's HostNode, or None.
    """

    def __init__(self, ctx, hostnode=None):
        self.ctx = ctx
        self.h = hostnode
        self.inbox = Inbox(ctx.store, ctx.identity)
        self.recorder = None
        self.banned = set()
        self.behind = False     # the own feed's front is not confirmed: receipts wait
        if hostnode is not None:
            self.recorder = Recorder(ctx.store, ctx.identity.public)
            self.recorder.attach(hostnode)
            self.banned = set(hostnode.node.goset.banned)

    def write(self, content):
        """Append to our feed (through the node when there is one). Returns: seq.

        Raises: ownfeed.FeedBehind while the own feed may be behind (the receipts stay
        owed until a sync confirms it)."""
        if self.h is None:
            return ownfeed.post(self.ctx, content)
        ownfeed.check_front(self.ctx.store)
        return self.h.post(content)

    def round(self):
        """One round of upkeep. Returns: the seqs of the receipts written."""
        if self.h is not None:
            now = {bytes(r[0]) for r in self.ctx.store.blocked(BLOCK)}
            for fid in now - self.banned:
                self.h.node.ban(fid)
            for fid in self.banned - now:
                self.h.node.unban(fid)
            self.banned = now
        self.inbox.refresh(SCAN_PER_ROUND)
        return self.inbox.settle(self.write)

    async def run(self, period=ROUND_S):
        while True:
            try:
                self.round()
            except ownfeed.FeedBehind as e:     # receipts wait for a sync (said once)
                if not self.behind:
                    log.warning("receipts wait: %s", e)
                self.behind = True
            except (ValueError, OSError, sqlite3.Error) as e:   # a busy or full store: next round
                log.warning("chat upkeep: %s", e)
            else:
                self.behind = False
            await asyncio.sleep(period)
