"""Resource budgets: how much one peer, and all peers together, may make a host hold.

A peer is authenticated but not trusted: whatever it sends may be chosen to grow our
memory or to keep our event loop busy. So every resource a peer can make us hold is
charged to a `Budget` (one per session) whose limits come from `Limits` (configuration),
never from sizes the peer declares. Each budget also charges its peer's key and the
`Pool` of its server, so one key's sessions together, and all sessions, are bounded too.

Resources (names are data: they appear in reasons, logs and tests):
  control_frames   mux control frames queued for a peer that does not read
  streams          open streams, counted until their service has ended
  buffered_bytes   bytes our services have queued for a peer and not yet sent
  received_bytes   bytes the peer sent that a service holds until it can act on them
                   (a rateless SETU flight until its last message)
  ibf_buckets      IBF buckets allocated for one SETU operation (received and built)
  unverified       received elements held but not yet verified (e.g. side-chain chunks
                   waiting for their entry, entries waiting for their predecessor)

`take()` raises `BudgetExceeded` (reason "budget: <resource>"); the session layer then
cuts the peer off and logs it. Fair shares: when the total would be passed and the taker's
key holds less than its fair share (the total divided among the keys holding any), the
key holding the most beyond its share gives way instead: its largest budget is closed and
its session cut off (scope "fair share"). A service or a SETU profile consults the budget
of its channel (`channel.budget`, None on channels without a session) with `take`/`give`,
and runs CPU-heavy steps (IBF decoding, building a set's state) through `offload()`, off
the event loop: one job per session at a time, HEAVY_JOBS jobs in total, the next one
always of the key that used the least heavy time lately (a peer queueing many jobs waits
behind everyone else's, not the other way round).

Thread safety: `take`/`give`/`strike` may be called from an offloaded job (worker thread).
"""
import asyncio
import collections
import itertools
import logging
import threading
import time

from tssb.session.errors import ProtocolError

log = logging.getLogger("tssb.session")

RESOURCES = ("control_frames", "streams", "buffered_bytes", "received_bytes", "ibf_buckets",
             "unverified")

# One heavy job at a time in all: CPython runs one thread at a time (GIL), so a second
# worker would add no throughput, only more waiting for the event loop's thread.
HEAVY_JOBS = 1
USAGE_HALF_LIFE_S = 10.0   # a key's heavy time counts half after this long (scheduling)
STRIKE_HALF_LIFE_S = 60.0  # a limit a key's operation hit counts half after this long
MAX_STRIKES = 8            # its search share never drops below 2^-8


class BudgetExceeded(ProtocolError):
    """A peer made us exceed a budget. `.reason` is "budget: <resource>" (stable);
    `.resource`, `.scope` ("session", "key", "total", "fair share" or "closed"), `.limit`
    and `.wanted` are data."""

    def __init__(self, resource, scope, limit, wanted):
        ProtocolError.__init__(self, "budget: " + resource,
                               "%s %d > %d (%s)" % (resource, wanted, limit, scope))
        self.resource = resource
        self.scope = scope
        self.limit = limit
        self.wanted = wanted


class Limits:
    """Configured limits, per session, per peer key and in total (all sessions of a server).

    Per session (each default with why):
      control_frames 128: an honest peer has at most 16 streams, each needing one
          ACCEPT/REFUSE, one CLOSE and one (coalesced) CREDIT queued: 48; twice that
          plus margin.
      streams 16 (mux.MAX_STREAMS); streams_per_service 2: one sync per service and
          session is what `tssb` clients open, a second for a retry while the first
          is being torn down.
      buffered_bytes 16 MiB: 16 one-MiB stream windows, what the peer's own credit
          lets it hold of ours in flight.
      received_bytes 16 MiB: a rateless flight of 2^20 symbols (8 MiB) with the wants
          and keys around it; elements are taken as they arrive (charged as unverified).
      ibf_buckets 2**19 (10 MiB at 20 bytes a bucket): a received IBF and the local
          one it is decoded against, up to 2**18 buckets each: differences of about
          2**17 elements (honest IBFs are twice the difference; larger differences
          are cheaper in full mode, draft 7.1.1).
      unverified 2**15 elements (about 26 MiB held at 0.8 KiB each): a full sync of
          32768 elements in random order (they can be checked only once their feed's
          earlier entries are in); larger first syncs need a larger limit
          (`--max-unverified`).
    Per key, by default KEY_FACTOR times the session's (a peer's second session, e.g.
    a retry while the first ends); in total TOTAL_FACTOR times (control frames are bounded
    per session only: their total follows from the number of sessions).
    """

    KEY_FACTOR = 2     # sessions of one key that may use their whole budget at once
    TOTAL_FACTOR = 8   # sessions that may use their whole budget at once

    def __init__(self, control_frames=128, streams=16, streams_per_service=2,
                 buffered_bytes=16 << 20, received_bytes=16 << 20, ibf_buckets=1 << 19,
                 unverified=1 << 15, per_key=None, total=None):
        self.session = {"control_frames": control_frames, "streams": streams,
                        "buffered_bytes": buffered_bytes, "received_bytes": received_bytes,
                        "ibf_buckets": ibf_buckets, "unverified": unverified}
        pooled = [k for k in self.session if k != "control_frames"]
        self.key = {k: self.session[k] * self.KEY_FACTOR for k in pooled}
        self.key.update(per_key or {})
        self.total = {k: self.session[k] * self.TOTAL_FACTOR for k in pooled}
        self.total.update(total or {})
        self.streams_per_service = streams_per_service
        for name, v in list(self.session.items()) + list(self.key.items()) + \
                list(self.total.items()) + [("streams_per_service", streams_per_service)]:
            if not isinstance(v, int) or v < 1:
                raise ValueError("limit %s must be a positive integer" % name)


class _Decaying:
    """A number per key that halves every `half_life` seconds."""

    def __init__(self, half_life, clock):
        self.half_life = half_life
        self.clock = clock
        self._v = {}

    def get(self, key):
        v, t = self._v.get(key, (0.0, 0.0))
        if not v:
            return 0.0
        now = self.clock()
        v *= 0.5 ** ((now - t) / self.half_life)
        if v < 1e-3:
            del self._v[key]
            return 0.0
        self._v[key] = (v, now)
        return v

    def add(self, key, amount):
        self._v[key] = (self.get(key) + amount, self.clock())


class _FairJobs:
    """Runs heavy jobs in worker threads, `slots` at a time. When a slot frees, the next
    job is the oldest one of the key whose recent heavy time (decaying, USAGE_HALF_LIFE_S,
    doubled per recent strike) is the least: a key queueing many jobs, or jobs that hit
    their limits, waits behind the others. Lives on the event loop's thread."""

    def __init__(self, slots, clock, strikes):
        self.free = slots
        self.usage = _Decaying(USAGE_HALF_LIFE_S, clock)
        self.strikes = strikes
        self.clock = clock
        self._waiting = collections.OrderedDict()    # key -> deque of (ticket, future)
        self._ticket = itertools.count()

    async def run(self, key, fn, args):
        loop = asyncio.get_running_loop()
        if self.free > 0 and not self._waiting:
            self.free -= 1
        else:
            fut = loop.create_future()
            self._waiting.setdefault(key, collections.deque()).append((next(self._ticket), fut))
            try:
                await fut
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    self._release()          # the slot was ours already: pass it on
                else:
                    self._forget(key, fut)
                raise
        t0 = self.clock()
        try:
            job = loop.run_in_executor(None, fn, *args)
        except BaseException:
            self._release()
            raise

        def done(f):
            # the slot is freed when the job really ends, even if our caller is cancelled
            # (a thread cannot be stopped): the bound on concurrent jobs stays exact
            self.usage.add(key, (self.clock() - t0) * 2 ** min(MAX_STRIKES, self.strikes(key)))
            self._release()
            if not f.cancelled():
                f.exception()
        job.add_done_callback(done)
        return await asyncio.shield(job)

    def _forget(self, key, fut):
        q = self._waiting.get(key)
        if q is not None:
            for item in q:
                if item[1] is fut:
                    q.remove(item)
                    break
            if not q:
                del self._waiting[key]

    def _release(self):
        while self._waiting:
            key = min(self._waiting, key=lambda k: (self.usage.get(k), self._waiting[k][0][0]))
            q = self._waiting[key]
            _, fut = q.popleft()
            if not q:
                del self._waiting[key]
            if not fut.done():
                fut.set_result(None)     # the slot passes to this job
                return
        self.free += 1

    @property
    def queued(self):
        return sum(len(q) for q in self._waiting.values())


class Pool:
    """The totals of all budgets of one server (or of one client process), per peer key
    and in all.

    Args:
        limits: Limits (default: the defaults).
        clock: monotonic seconds (for the decaying heavy time and strikes).
    """

    def __init__(self, limits=None, clock=time.monotonic):
        self.limits = limits or Limits()
        self.held = dict.fromkeys(self.limits.total, 0)
        self.exceeded = {}       # reason -> count, for status lines and tests
        self._lock = threading.Lock()
        self._keys = {}          # key -> {"held": {resource: n}, "budgets": set}
        self._strikes = _Decaying(STRIKE_HALF_LIFE_S, clock)
        self._jobs = _FairJobs(HEAVY_JOBS, clock, self.strikes)

    def budget(self, key=None):
        """A new per-session Budget charging this pool (and `key`'s share of it: the
        peer's public key; None: the budget is a key of its own)."""
        return Budget(self, key)

    def strikes(self, key):
        """Recent limits the key's operations hit (decaying, STRIKE_HALF_LIFE_S)."""
        with self._lock:
            return self._strikes.get(key)

    def key_held(self, key):
        """What the budgets of `key` hold together (resource -> units)."""
        with self._lock:
            k = self._keys.get(key)
            return dict(k["held"]) if k else dict.fromkeys(self.limits.key, 0)

    @property
    def jobs_queued(self):
        return self._jobs.queued

    def _join(self, budget):
        with self._lock:
            k = self._keys.get(budget.key)
            if k is None:
                k = self._keys[budget.key] = {"held": dict.fromkeys(self.limits.key, 0),
                                              "budgets": {}}     # ordered: oldest first
            k["budgets"][budget] = None
        return k

    def _leave(self, budget):
        # under the lock, after budget.held went back
        k = self._keys.get(budget.key)
        if k is not None:
            k["budgets"].pop(budget, None)
            if not k["budgets"]:
                del self._keys[budget.key]

    def _reclaim(self, resource, n, taker):
        """The total would be passed: if the taker's key stays within its fair share,
        close the largest budget of the key holding the most beyond its share until the
        units fit. Returns the budgets closed (their sessions must be cut off), or None
        when the taker itself is over its share. Under the lock."""
        tlimit = self.limits.total[resource]
        holders = {k: v["held"][resource] for k, v in self._keys.items() if v["held"][resource]}
        mine = holders.get(taker.key, 0)
        fair = tlimit // (len(holders) + (0 if mine else 1))
        if mine + n > fair:
            return None
        victims = []
        while self.held[resource] + n > tlimit:
            over = [(h, k) for k, h in holders.items() if k != taker.key and h > fair]
            if not over:
                break
            _, key = max(over, key=lambda hk: hk[0])
            victim = max(self._keys[key]["budgets"], key=lambda b: b.held[resource])
            holders[key] -= victim.held[resource]
            victim._close_locked()
            victims.append(victim)
        if self.held[resource] + n > tlimit:
            return None
        return victims


class Budget:
    """The budget of one session (see the module text). Create with `Pool.budget()`.

    `on_cut`: function(BudgetExceeded) the session sets to be cut off when another key's
    fair share needs what this one holds (called on the event loop's thread).
    """

    def __init__(self, pool, key=None):
        self.pool = pool
        self.limits = pool.limits
        self.key = key if key is not None else object()
        self.held = dict.fromkeys(RESOURCES, 0)
        self.closed = False
        self.on_cut = None
        self._loop = None
        self._job_lock = None    # asyncio.Lock: one heavy job per session
        self._share = pool._join(self)["held"]

    def attach(self, on_cut):
        """Cut the session off through `on_cut(BudgetExceeded)` when the pool reclaims
        this budget for a fairer share (call on the event loop)."""
        self.on_cut = on_cut
        self._loop = asyncio.get_running_loop()

    def take(self, resource, n=1):
        """Charge `n` units of `resource`.

        Raises:
            BudgetExceeded: the session's, its key's or the total limit would be passed,
                or the session has ended (scope "closed"); nothing is charged then.
        """
        pool = self.pool
        victims = ()
        with pool._lock:
            if self.closed:
                raise BudgetExceeded(resource, "closed", 0, n)
            want = self.held[resource] + n
            limit = self.limits.session[resource]
            if want > limit:
                raise self._exceeded(resource, "session", limit, want)
            if resource in pool.held:
                kwant = self._share[resource] + n
                if kwant > self.limits.key[resource]:
                    raise self._exceeded(resource, "key", self.limits.key[resource], kwant)
                total = pool.held[resource] + n
                tlimit = self.limits.total[resource]
                if total > tlimit:
                    victims = pool._reclaim(resource, n, self)
                    if victims is None:
                        raise self._exceeded(resource, "total", tlimit, total)
                    for _ in victims:
                        self._exceeded(resource, "fair share", tlimit, total)
                pool.held[resource] += n
                self._share[resource] += n
            self.held[resource] = want
        for v in victims:
            v._cut(BudgetExceeded(resource, "fair share", self.limits.total[resource],
                                  pool.held[resource]))

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
                self._share[resource] -= n

    def _exceeded(self, resource, scope, limit, want):
        e = BudgetExceeded(resource, scope, limit, want)
        self.pool.exceeded[e.reason] = self.pool.exceeded.get(e.reason, 0) + 1
        return e

    def close(self):
        """The session ended: return everything it holds to the pool. Later `take`s
        fail (so a job still running for a dead session stops), later `give`s do nothing."""
        with self.pool._lock:
            self._close_locked()

    def _close_locked(self):
        if self.closed:
            return
        for name, n in self.held.items():
            if name in self.pool.held:
                self.pool.held[name] -= n
                self._share[name] -= n
            self.held[name] = 0
        self.closed = True
        self.pool._leave(self)

    def _cut(self, exc):
        """Reclaimed for another key's fair share: cut the session off (from any thread;
        the session ends on its loop, after the take that reclaimed it)."""
        if self.on_cut is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.on_cut, exc)

    def strike(self, what):
        """The peer's operation hit a limit (`what`, for the log): its key's next heavy
        jobs queue behind other keys' and its searches get half the time (decaying)."""
        with self.pool._lock:
            self.pool._strikes.add(self.key, 1.0)
        log.info("peer %s hit the %s limit", _key_text(self.key), what)

    def search_share(self):
        """The share of the configured search time this key's operations get now: halved
        per recent strike (Pool.strikes), at least 2^-MAX_STRIKES."""
        return 0.5 ** min(MAX_STRIKES, self.pool.strikes(self.key))

    async def offload(self, fn, *args):
        """Run `fn(*args)` in a worker thread, one job of this session at a time and
        HEAVY_JOBS in all (the next job of the key with the least recent heavy time),
        so a peer's heavy request never stalls the event loop that serves the others.

        Returns: fn's result. Raises: whatever fn raises.
        """
        if self._job_lock is None:
            self._job_lock = asyncio.Lock()
        async with self._job_lock:
            return await self.pool._jobs.run(self.key, fn, args)


def _key_text(key):
    return key.hex()[:16] if isinstance(key, bytes) else "(session)"


async def offload(budget, fn, *args):
    """`budget.offload(fn, *args)`, or a plain worker-thread call without a budget."""
    if budget is not None:
        return await budget.offload(fn, *args)
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


def log_cut_off(peer, reason, detail=""):
    """One warning line when a peer is cut off for exceeding a budget."""
    log.warning("peer %s cut off: %s%s", peer.hex()[:16] if isinstance(peer, bytes) else peer,
                reason, (" (%s)" % detail) if detail else "")
