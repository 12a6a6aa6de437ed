"""`clock` session service (contract 3): `tssb serve` dispatches streams named "clock" here.

The client's HELLO names the mode; the server answers with a machine of the same mode over
its own data: feeds of `ctx.store`, threads and counters in the clock tables of
`ctx.store.db`.
"""
import asyncio

from tssb.channel import PEER_TIMEOUT_S
from tssb.clock.bloom import DEFAULT_K, DEFAULT_N
from tssb.clock.driver import run_sync
from tssb.clock.errors import ClockError
from tssb.clock.repo import FeedRepo, ThreadRepo
from tssb.clock.sync import ERROR, HELLO, MODES, SyncMachine
from tssb.clock.wire import Reader, varint


def store_db(store):
    """The host store's sqlite3 connection (contract 4: `ctx.store.db`).

    Raises:
        ClockError: "no_db" for a store without one (e.g. the core's MemStore).
    """
    db = getattr(store, "db", None)
    if db is None:
        raise ClockError("no_db")
    return db


def repo_for(ctx, mode, n=DEFAULT_N, k=DEFAULT_K):
    """The repository a mode syncs: feeds for "entity"/"feeds", threads for "threads"."""
    if mode == "threads":
        return ThreadRepo(store_db(ctx.store), n, k)
    return FeedRepo(ctx.store, store_db(ctx.store), n, k)


def parse_hello(msg):
    """(mode, n, k) of a HELLO message.

    Raises:
        ClockError: not a well-formed HELLO.
    """
    if not msg or msg[0] != HELLO:
        raise ClockError("expected_hello")
    r = Reader(msg[1:])
    r.byte("version")
    code = r.byte("mode")
    n = r.uint("n")
    k = r.uint("k")
    names = {v: name for name, v in MODES.items()}
    if code not in names:
        raise ClockError("mode", code)
    return names[code], n, k


async def serve(channel, ctx, peer):
    """Answer one clock sync on `channel` for the authenticated `peer` (32-byte key).

    Returns:
        the summary dict (also written to the event log).
    """
    try:
        first = await asyncio.wait_for(channel.recv(), PEER_TIMEOUT_S)
    except asyncio.TimeoutError:
        channel.close()
        return {"ok": False, "reason": "timeout"}
    events = getattr(ctx, "events", None)
    try:
        mode, n, k = parse_hello(first)
        machine = SyncMachine(repo_for(ctx, mode, n, k), mode, n=n, k=k,
                              signer=ctx.identity.seed)   # our joins of forked feeds
    except ClockError as e:   # tell the client why before closing
        reason = e.reason.encode()
        try:
            await channel.send(bytes([ERROR]) + varint(len(reason)) + reason)
        finally:
            channel.close()
        return {"ok": False, "reason": e.reason}
    machine.budget = getattr(channel, "budget", None)
    try:
        return await run_sync(channel, machine, first=first, events=events, peer=peer)
    finally:
        machine.release()
        channel.close()
