"""Transmit limiter: keeps a node inside its band's duty cycle and dwell time.

It never sends and never drops: `wait_ms(airtime, now)` says how long the caller must
wait before a frame of that airtime may start (0 = now); `record(airtime, now)` books a
transmission that started. Frames that can never be legal (longer than the dwell time or
than the whole duty budget) raise `TxRefused`.

Duty cycle: the airtime of transmissions that started in the last `window_ms` plus the
new one must not exceed `duty_permille/1000 * window_ms` (a sliding window, as ETSI
EN 300 220 counts it over one hour). History is a bounded ring; when it is full the two
oldest bookings are merged onto the later start time, which over-counts usage (never
under-counts), so the bound costs throughput, not legality.
"""
from array import array

MAX_HISTORY = 256  # bookings kept; at 1%/hour and >= 15 ms frames at most ~2400 fit,
                   # the merge rule above keeps the bound conservative


class TxRefused(ValueError):
    """A frame that no amount of waiting makes legal (reason: 'dwell' or 'budget')."""

    def __init__(self, reason, airtime_ms):
        ValueError.__init__(self, "%s: %d ms" % (reason, airtime_ms))
        self.reason = reason
        self.airtime_ms = airtime_ms


class TxLimiter:
    def __init__(self, limits, max_history=MAX_HISTORY):
        """Args:
            limits: dict with duty_permille, window_ms, dwell_ms (None = no such rule),
                    as regions.RULES.
        """
        self.duty = limits.get("duty_permille")
        self.window = limits.get("window_ms") or 0
        self.dwell = limits.get("dwell_ms")
        self.budget = (self.duty * self.window) // 1000 if self.duty else None
        self._start = array("q" if _has_q() else "i", [0] * max_history) if self.duty else None
        self._air = array("i", [0] * max_history) if self.duty else None
        self._head = 0   # index of the oldest booking
        self._n = 0
        self._used = 0   # sum of airtime in the ring
        self.waits = 0   # how often a wait was imposed (for the event log)

    def _expire(self, now_ms):
        cap = len(self._air)
        while self._n and self._start[self._head] <= now_ms - self.window:
            self._used -= self._air[self._head]
            self._head = (self._head + 1) % cap
            self._n -= 1

    def used_ms(self, now_ms):
        """Airtime booked in the window ending at now_ms."""
        if self.budget is None:
            return 0
        self._expire(now_ms)
        return self._used

    def wait_ms(self, airtime_ms, now_ms):
        """Milliseconds to wait before a frame of `airtime_ms` may start.

        Returns:
            0 when it may start now.
        Raises:
            TxRefused: longer than the dwell time, or than the whole duty budget.
        """
        if self.dwell is not None and airtime_ms > self.dwell:
            raise TxRefused("dwell", airtime_ms)
        if self.budget is None:
            return 0
        if airtime_ms > self.budget:
            raise TxRefused("budget", airtime_ms)
        self._expire(now_ms)
        need = self._used + airtime_ms - self.budget
        if need <= 0:
            return 0
        # Free bookings oldest first until enough airtime leaves the window.
        cap = len(self._air)
        i = self._head
        freed = 0
        for _ in range(self._n):
            freed += self._air[i]
            if freed >= need:
                self.waits += 1
                return self._start[i] + self.window - now_ms
            i = (i + 1) % cap
        return 0  # unreachable: need <= _used whenever airtime <= budget

    def record(self, airtime_ms, now_ms):
        """Book a transmission of `airtime_ms` that starts at now_ms."""
        if self.budget is None:
            return
        self._expire(now_ms)
        cap = len(self._air)
        if self._n == cap:
            # Merge the oldest booking into the next one (later start: over-counts).
            nxt = (self._head + 1) % cap
            self._air[nxt] += self._air[self._head]
            self._head = nxt
            self._n -= 1
        j = (self._head + self._n) % cap
        self._start[j] = now_ms
        self._air[j] = airtime_ms
        self._n += 1
        self._used += airtime_ms


def _has_q():
    try:
        array("q", [0])
        return True
    except ValueError:
        return False
