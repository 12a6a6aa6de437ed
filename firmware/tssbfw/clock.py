"""A monotonic millisecond clock that does not wrap.

MicroPython's `time.ticks_ms()` wraps (at 2**30 ms, about 12.4 days, on the ESP32), but
the protocol core compares absolute integer milliseconds. `Clock.now()` accumulates
`ticks_diff` steps into an unbounded int; it must be read at least once per wrap period
(the firmware reads it many times a second). On CPython it falls back to
`time.monotonic()`.
"""
import time

_ticks_ms = getattr(time, "ticks_ms", None)
_ticks_diff = getattr(time, "ticks_diff", None)


class Clock:
    """Args:
        ticks_ms, ticks_diff: the tick source (default: time module).
        scale: virtual milliseconds per real millisecond (1 on a board; tests and
            simulations run faster).
    """

    def __init__(self, ticks_ms=None, ticks_diff=None, scale=1):
        self.scale = scale
        self._ticks = ticks_ms or _ticks_ms
        self._diff = ticks_diff or _ticks_diff
        if self._ticks is None:
            t0 = time.monotonic()
            self._ticks = lambda: int((time.monotonic() - t0) * 1000)
            self._diff = lambda a, b: a - b
        self._last = self._ticks()
        self._now = 0

    def now(self):
        """Milliseconds since this clock was created (monotonic, never wraps).

        Returns:
            int milliseconds.
        """
        t = self._ticks()
        d = self._diff(t, self._last)
        if d > 0:  # ticks never go back; a negative diff would be a misuse
            self._now += d
            self._last = t
        return self._now * self.scale
