"""Shared helpers of the bridge tests: fast node timing and a convergence wait."""
import asyncio
import time

from tssb.bridge.hostnode import HostNode
from tssb.context import Identity
from tssb.store import Store

FAST = {"claim": (50, 300, 0), "goset": (100, 300, 50), "want": (150, 200, 50),
        "chnk": (200, 200, 50)}


def host(path=":memory:"):
    return HostNode(Store(path), Identity.generate(), timing=FAST)


def has_all(store, fid, n):
    return store.has_feed(fid) and store.front(fid)[0] >= n


async def wait_for(cond, limit_s=30.0):
    """Poll cond() until true; returns whether it became true (no timing asserted)."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if cond():
            return True
        await asyncio.sleep(0.05)
    return cond()
