"""The "trdag" stream of the session server, and the host-side helpers the CLI shares.

`serve(channel, ctx, peer)` answers a sync: it reads the initiator's HELLO (which names
the root), reconciles that DAG from the host database and logs sync_start / sync_done.
"""
import sqlite3

from tssb import synclog
from tssb.trdag import dagstore, driver
from tssb.trdag.errors import TrdagError
from tssb.trdag.session import SyncSession

PROTO = "trdag"


def open_index(ctx):
    """The DAG index in the host database (tables created on first use).

    Uses `ctx.store.db` when the store exposes its connection, else a second connection
    to the same SQLite file (WAL mode allows it).
    """
    db = getattr(ctx.store, "db", None)
    if db is None:
        path = getattr(ctx.store, "path", None)
        if not path or path == ":memory:":
            raise TrdagError("no_database", "store has neither .db nor a file path")
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
        index = dagstore.SqliteDagIndex(db)
        index.owned = True          # our own connection: close it when done
        return index
    return dagstore.SqliteDagIndex(db)


def close_index(index):
    if getattr(index, "owned", False):
        index.db.close()


def done_fields(session, stats, peer, ok, reason):
    """Fields of the sync_done event (contract 5, tssb.synclog)."""
    return synclog.fields(PROTO, peer, ok, reason, session.opt.name(), rounds=stats.rounds,
                          bytes_sent=stats.bytes_sent, bytes_recv=stats.bytes_recv,
                          msgs_sent=stats.msgs_sent, msgs_recv=stats.msgs_recv,
                          elements_sent=stats.elements_sent,
                          elements_recv=stats.elements_recv,
                          duration_ms=getattr(stats, "duration_ms", 0))


async def run_logged(channel, ctx, peer, session, progress=None):
    """Run a session with sync_start / sync_done events. Returns stats; re-raises errors.

    peer: the remote's 32-byte key."""
    synclog.start(ctx.events, PROTO, peer)
    ok, reason = False, None
    try:
        stats = await driver.run(channel, session, progress)
        ok = True
        return stats
    except BaseException as e:
        reason = e
        raise
    finally:
        f = done_fields(session, session.stats, peer, ok, reason)
        if f["peer"] is not None:
            ctx.events.emit("sync_done", **f)


async def serve(channel, ctx, peer):
    """Answer one trDAG sync on `channel` (contract 3). peer: remote Ed25519 key."""
    index = open_index(ctx)
    dag = dagstore.Dag(index, ctx.store, budget=getattr(channel, "budget", None))
    session = SyncSession(dag, initiator=False)
    try:
        await run_logged(channel, ctx, peer, session)
    except TrdagError:
        pass            # reported to the peer (ABORT) and logged; the server goes on
    finally:
        dag.release()
        channel.close()
        close_index(index)
