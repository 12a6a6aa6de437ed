"""Resource budgets: how much one peer, and all peers together, may make a host hold.

A peer is authenticated but not trusted: whatever it sends may be chosen to grow our
memory or to keep our event loop busy. So every resource a peer can make us hold is
charged to a `Budget` (one per session) whose limits come from `Limits` (configuration),
never from sizes the peer declares. Each budget also charges the `Pool` of its server, so
the sum over all sessions is bounded too.

Resources (names are data: they appear in reasons, logs and tests):
  control_frames   mux control frames queued for a peer that does not read
  streams          open streams, counted until their service has ended
  buffered_bytes   bytes our services have queued for a peer and not yet sent
  ibf_buckets      IBF buckets allocated for one SETU operation (received and built)
  unverified       received elements held but not yet verified (e.g. side-chain chunks
                   waiting for their entry, entries waiting for their predecessor)

`take()` raises `BudgetExceeded` (reason "budget: <resource>"); the session layer then
cuts the peer off and logs it. A service or a SETU profile consults the budget of its
channel (`channel.budget`, None on channels without a session) with `take`/`give`, and
runs CPU-heavy steps (IBF decoding, building a set's state) through `offload()`, off the
event loop: one job per session at a time, HEAVY_JOBS jobs in total.

Thread safety: `take`/`give` may be called from an offloaded job (worker thread).
"""
import asyncio
import logging
import threading

from tssb.session.errors import ProtocolError

log = logging.getLogger("tssb.session")

RESOURCES = ("control_frames", "streams", "buffered_bytes", "ibf_buckets", "unverified")

# One heavy job at a time in all: CPython runs one thread at a time (GIL), so a second
# worker would add no throughput, only more waiting for the event loop's thread.
HEAVY_JOBS = 1


class BudgetExceeded(ProtocolError):
    """A peer made us exceed a budget. `.reason` is "budget: <resource>" (stable);
    `.resource`, `.scope` ("session" or "total"), `.limit` and `.wanted` are data."""

    def __init__(self, resource, scope, limit, wanted):
        ProtocolError.__init__(self, "budget: " + resource,
                               "%s %d > %d (%s)" % (resource, wanted, limit, scope))
        self.resource = resource
        self.scope = scope
        self.limit = limit
        self.wanted = wanted


class Limits:
    """Configured limits, per session and in total (all sessions of one server).

    Per session (each default with why):
      control_frames 128: an honest peer has at most 16 streams, each needing one
          ACCEPT/REFUSE, one CLOSE and one (coalesced) CREDIT queued: 48; twice that
          plus margin.
      streams 16 (mux.MAX_STREAMS); streams_per_service 2: one sync per service and
          session is what `tssb` clients open, a second for a retry while the first
          is being torn down.
      buffered_bytes 16 MiB: 16 one-MiB stream windows, what the peer's own credit
          lets it hold of ours in flight.
      ibf_buckets 2**19 (10 MiB at 20 bytes a bucket): a received IBF and the local
          one it is decoded against, up to 2**18 buckets each: differences of about
          2**17 elements (honest IBFs are twice the difference; larger differences
          are cheaper in full mode, draft 7.1.1).
      unverified 2**15 elements (about 26 MiB held at 0.8 KiB each): a full sync of
          32768 elements in random order (they can be checked only once their feed's
          earlier entries are in); larger first syncs need a larger limit
          (`--max-unverified`).
    In total, by default TOTAL_FACTOR times the session's (control frames are bounded
    per session only: their total follows from the number of sessions).
    """

    TOTAL_FACTOR = 8   # sessions that may use their whole budget at once

    def __init__(self, control_frames=128, streams=16, streams_per_service=2,
                 buffered_bytes=16 << 20, ibf_buckets=1 << 19, unverified=1 << 15,
                 total=None):
        self.session = {"control_frames": control_frames, "streams": streams,
                        "buffered_bytes": buffered_bytes, "ibf_buckets": ibf_buckets,
                        "unverified": unverified}
        self.total = {k: v * self.TOTAL_FACTOR for k, v in self.session.items()
                      if k != "control_frames"}
        self.total.update(total or {})
        self.streams_per_service = streams_per_service
        for name, v in list(self.session.items()) + list(self.total.items()) + [
                ("streams_per_service", streams_per_service)]:
            if not isinstance(v, int) or v < 1:
                raise ValueError("limit %s must be a positive integer" % name)


class Pool:
    """The totals of all budgets of one server (or of one client process).

    Args:
        limits: Limits (default: the defaults).
    """

    def __init__(self, limits=None):
        self.limits = limits or Limits()
        self.held = dict.fromkeys(self.limits.total, 0)
        self.exceeded = {}       # reason -> count, for status lines and tests
        self._lock = threading.Lock()
        self._heavy = None       # asyncio.Semaphore, made in the loop on first use

    def budget(self):
        """A new per-session Budget charging this pool."""
        return Budget(self)

    async def _run_heavy(self, fn, args):
        if self._heavy is None:
            self._heavy = asyncio.Semaphore(HEAVY_JOBS)
        await self._heavy.acquire()
        loop = asyncio.get_running_loop()
        try:
            fut = loop.run_in_executor(None, fn, *args)
        except BaseException:
            self._heavy.release()
            raise
        # The slot is freed when the job really ends, even if our caller is cancelled
        # (a thread cannot be stopped): the bound on concurrent jobs stays exact.
        fut.add_done_callback(lambda f: (self._heavy.release(),
                                         f.cancelled() or f.exception()))
        return await asyncio.shield(fut)


class Budget:
    """The budget of one session (see the module text). Create with `Pool.budget()`."""

    def __init__(self, pool):
        self.pool = pool
        self.limits = pool.limits
        self.held = dict.fromkeys(RESOURCES, 0)
        self.closed = False
        self._job_lock = None    # asyncio.Lock: one heavy job per session

    def take(self, resource, n=1):
        """Charge `n` units of `resource`.

        Raises:
            BudgetExceeded: the session's or the total limit would be passed, or the
                session has ended (scope "closed"); nothing is charged then.
        """
        pool = self.pool
        with pool._lock:
            if self.closed:
                raise BudgetExceeded(resource, "closed", 0, n)
            want = self.held[resource] + n
            limit = self.limits.session[resource]
            if want > limit:
                raise self._exceeded(resource, "session", limit, want)
            if resource in pool.held:
                total = pool.held[resource] + n
                tlimit = self.limits.total[resource]
                if total > tlimit:
                    raise self._exceeded(resource, "total", tlimit, total)
                pool.held[resource] = total
            self.held[resource] = want

    def give(self, resource, n=1):
        """Return `n` units taken earlier (after close(): nothing left to return)."""
        pool = self.pool
        with pool._lock:
            if self.closed:
                return
            n = min(n, self.held[resource])
            self.held[resource] -= n
            if resource in pool.held:
                pool.held[resource] -= n

    def _exceeded(self, resource, scope, limit, want):
        e = BudgetExceeded(resource, scope, limit, want)
        self.pool.exceeded[e.reason] = self.pool.exceeded.get(e.reason, 0) + 1
        return e

    def close(self):
        """The session ended: return everything it holds to the pool. Later `take`s
        fail (so a job still running for a dead session stops), later `give`s do nothing."""
        with self.pool._lock:
            if self.closed:
                return
            for name, n in self.held.items():
                if name in self.pool.held:
                    self.pool.held[name] -= n
                self.held[name] = 0
            self.closed = True

    async def offload(self, fn, *args):
        """Run `fn(*args)` in a worker thread, one job of this session at a time and
        HEAVY_JOBS in all (first come, first served), so a peer's heavy request never
        stalls the event loop that serves the others.

        Returns: fn's result. Raises: whatever fn raises.
        """
        if self._job_lock is None:
            self._job_lock = asyncio.Lock()
        async with self._job_lock:
            return await self.pool._run_heavy(fn, args)


async def offload(budget, fn, *args):
    """`budget.offload(fn, *args)`, or a plain worker-thread call without a budget."""
    if budget is not None:
        return await budget.offload(fn, *args)
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


def log_cut_off(peer, reason, detail=""):
    """One warning line when a peer is cut off for exceeding a budget."""
    log.warning("peer %s cut off: %s%s", peer.hex()[:16] if isinstance(peer, bytes) else peer,
                reason, (" (%s)" % detail) if detail else "")
