"""Peer policy of the session server: who may connect, how often, how many, how long.

- Identity: an allow-list of peer public keys (the store's `peers` table), or open mode
  which must be chosen explicitly.
- Connection rate: a token bucket per remote address and one for all addresses; the
  per-address table is bounded (oldest entry evicted), so spoofed sources cannot grow it.
- Concurrency: at most `max_handshakes` connections in their handshake at once, then at
  most `max_sessions` sessions, `max_per_key` of them for one peer key (`place`). When the
  server is full, a session idle for `idle_when_busy` seconds (no frame received, no
  service running) ends to make room, else one of the key holding the most sessions
  beyond its fair share (max_sessions / keys); else the newcomer is refused.
- Time: a deadline for the whole handshake and an idle timeout on established sessions.

A connection refused before or during the handshake is closed without a word: the peer
learns nothing about why (or whether the server would talk to someone else). An
authenticated, allowed peer refused for capacity is told why (`place`'s reason).
The clock is injectable so the limits are tested without sleeping.
"""
import collections
import time

# Defaults: a handful of reconciliation partners per host, each reconnecting every few
# seconds at most; generous enough for tests and demos, tight enough to blunt floods.
MAX_SESSIONS = 32
MAX_SESSIONS_PER_KEY = 8   # a host's own commands at once (sync, dag, clock, web) and retries
MAX_HANDSHAKES = 16        # connections in their handshake at once
IDLE_WHEN_BUSY = 10.0      # seconds without a frame or a running service after which a
                           # session gives way to a newcomer when the server is full
RATE_PER_ADDR = 1.0        # connections per second per remote address, sustained
BURST_PER_ADDR = 10        # ... and in a burst
RATE_TOTAL = 20.0          # all addresses together
BURST_TOTAL = 100
MAX_TRACKED_ADDRS = 4096   # bound on the per-address bucket table
HANDSHAKE_TIMEOUT = 10.0   # seconds for all four handshake messages
IDLE_TIMEOUT = 300.0       # seconds without any frame received


class TokenBucket:
    """Allows `burst` events at once and `rate` per second sustained."""

    def __init__(self, rate, burst, now):
        self.rate = float(rate)
        self.burst = float(burst)
        self.tokens = float(burst)
        self.stamp = now

    def take(self, now):
        """Returns: True (and uses a token) if an event is allowed at time `now`."""
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class PeerPolicy:
    """Decisions of a session server (and the network key and identity checks of a client).

    Args:
        network_key: 32-byte SHS network key.
        allow: function(public_key) -> bool deciding the allow-list; ignored in open mode.
        open_mode: True accepts any peer that knows the network key (explicit choice).
        max_sessions, rate_per_addr, burst_per_addr, rate_total, burst_total,
        handshake_timeout, idle_timeout, max_per_key, max_handshakes, idle_when_busy:
            limits (see module constants).
        clock: function() -> seconds (monotonic).
    Raises:
        ValueError: no allow function and not open mode, or a bad key length.
    """

    def __init__(self, network_key, allow=None, open_mode=False, max_sessions=MAX_SESSIONS,
                 rate_per_addr=RATE_PER_ADDR, burst_per_addr=BURST_PER_ADDR,
                 rate_total=RATE_TOTAL, burst_total=BURST_TOTAL,
                 handshake_timeout=HANDSHAKE_TIMEOUT, idle_timeout=IDLE_TIMEOUT,
                 max_per_key=MAX_SESSIONS_PER_KEY, max_handshakes=MAX_HANDSHAKES,
                 idle_when_busy=IDLE_WHEN_BUSY, clock=time.monotonic):
        if len(network_key) != 32:
            raise ValueError("network key must be 32 bytes")
        if allow is None and not open_mode:
            raise ValueError("give an allow-list or choose open mode explicitly")
        self.network_key = bytes(network_key)
        self._allow = allow
        self.open_mode = open_mode
        self.max_sessions = max_sessions
        self.max_per_key = max_per_key
        self.max_handshakes = max_handshakes
        self.idle_when_busy = idle_when_busy
        self.handshake_timeout = handshake_timeout
        self.idle_timeout = idle_timeout
        self._clock = clock
        self._rate = (rate_per_addr, burst_per_addr)
        self._total = TokenBucket(rate_total, burst_total, clock())
        self._buckets = collections.OrderedDict()
        self.active = 0
        self.refused = collections.Counter()   # reason -> count, for status and tests

    @classmethod
    def from_context(cls, ctx, open_mode=False, **limits):
        """Policy from a host context: its network key and its peers table as allow-list."""
        return cls(ctx.network_key, allow=ctx.store.is_peer, open_mode=open_mode, **limits)

    def admit(self, addr):
        """Decide on a new TCP connection from `addr` (the remote host).

        Returns: None to go ahead with the handshake (the caller must call `release()`
        when it ends), or the reason for refusing (kept for counters, never sent).
        """
        now = self._clock()
        if self.active >= self.max_handshakes:
            return self._refuse("too many handshakes")
        bucket = self._buckets.get(addr)
        if bucket is None:
            if len(self._buckets) >= MAX_TRACKED_ADDRS:
                self._buckets.popitem(last=False)
            bucket = self._buckets[addr] = TokenBucket(self._rate[0], self._rate[1], now)
        else:
            self._buckets.move_to_end(addr)
        if not bucket.take(now):
            return self._refuse("rate per address")
        if not self._total.take(now):
            return self._refuse("rate total")
        self.active += 1
        return None

    def release(self):
        """A handshake admitted by `admit()` ended."""
        self.active = max(0, self.active - 1)

    def place(self, key, sessions):
        """Decide on an authenticated peer `key` given the running `sessions` (objects with
        .peer, .last_frame (clock seconds) and .busy (a service running)).

        Returns: (sessions to end first, None) to admit it, or (None, reason) to refuse;
        the reason is told to the peer ("server busy: ...").
        """
        now = self._clock()

        def idle(s):
            return not s.busy and now - s.last_frame >= self.idle_when_busy

        def stalest(group):
            return min(group, key=lambda s: (s.busy, s.last_frame))

        mine = [s for s in sessions if s.peer == key]
        if len(mine) >= self.max_per_key:
            own_idle = [s for s in mine if idle(s)]
            if own_idle:
                return [stalest(own_idle)], None
            return None, self._refuse("server busy: too many sessions of this key (%d)"
                                      % self.max_per_key)
        if len(sessions) < self.max_sessions:
            return [], None
        idle_ones = [s for s in sessions if idle(s)]
        if idle_ones:
            return [stalest(idle_ones)], None
        per_key = collections.Counter(s.peer for s in sessions)
        fair = self.max_sessions // (len(per_key) + (0 if mine else 1))
        worst, count = per_key.most_common(1)[0]
        if count > max(fair, len(mine) + 1):
            return [stalest([s for s in sessions if s.peer == worst])], None
        return None, self._refuse("server busy: too many sessions")

    def allows(self, public):
        """Returns: True if the authenticated peer `public` may have a session."""
        if self.open_mode:
            return True
        ok = bool(self._allow(public))
        if not ok:
            self.refused["unknown peer"] += 1
        return ok

    def _refuse(self, reason):
        self.refused[reason] += 1
        return reason
