"""`tssb serve` stream "setu": the responder side of a SETU sync over a session stream."""
from tssb import synclog
from tssb.session.budget import offload

from .driver import reconcile
from .machine import Config
from .rateless_store import StoreSets


async def serve(channel, ctx, peer):
    """Reconcile the host store with the peer that opened the stream.

    Args:
        channel: the stream (Channel interface).
        ctx: tssb.context.Context (uses .store and .events).
        peer: the remote's 32-byte Ed25519 public key.
    """
    budget = getattr(channel, "budget", None)
    # builds only the set of the profile the peer proposes, when its OPERATION_REQUEST is
    # handled (off the event loop: the driver offloads it)
    sets = StoreSets(ctx.store, budget)
    peer_hex = peer.hex()
    ctx.events.emit("sync_start", proto="setu", peer=peer_hex)
    res = dict(ok=False, reason=None)
    try:
        res = await reconcile(channel, sets, initiator=False, config=Config(), budget=budget)
        await offload(budget, sets.finish)    # rateless: indexes what arrived
    except Exception as e:  # the event log records every ending, then the error propagates
        res = dict(ok=False, reason=getattr(e, "reason", type(e).__name__))
        raise
    finally:
        sets.release()
        ctx.events.emit("sync_done", **summary_fields(peer_hex, res))


def summary_fields(peer, res):
    """sync_done event fields (contract 5, tssb.synclog) from a driver result."""
    return synclog.fields("setu", peer, res.get("ok"), res.get("reason"), res.get("mode"),
                          **{k: res.get(k, 0) for k in synclog.COUNTS})
