"""Send scheduler: the only way frames reach the radio.

Modelled on the deployed ESP32 scheduler (`LIB/sched.cpp`, tinyssb-wire.md 5.1): at most
`MAX_QUEUE` frames wait, a frame identical to one already queued is dropped as a
duplicate, and one frame goes out per slot, the next slot `GAP_MS + rand(JITTER_MS)`
after the previous transmission ended (random jitter keeps neighbours that heard the same
request from answering in lockstep). The ESP32's slots tick whether or not anything
waits, so a frame queued while idle waits for the next slot, a random part of one
(rand(IDLE_SLOT_MS)): without that, neighbours that react to the same packet (an owed
entry, a WANT brought forward) would all start at once and collide. Each frame is also
cleared with the region's transmit limiter first; when the limiter asks for a wait the
frame stays queued and the slot moves to the end of the wait, so the node queues rather
than breaks the law.

One departure from the ESP32 cadence: a data frame (an entry or chunk, 124 bytes) that
follows one goes after BURST's shorter gap. That is an entry and its side chain, or a
reply's entries: the receiver learns nothing until the last one, and is busy receiving
(deaf to everyone else, half duplex) the whole time, so the shorter the burst, the
fewer the frames of others it loses and the sooner it can pass them on (a 300-byte post
per hop, tools/bench_sim.py: 2.4x -> 1.5x its airtime). The airtime is the same and the
limiter clears every frame as before. The simulator's deployed-behaviour boards keep the
ESP32 slots (burst=None).

Time is passed in (`now_ms`); the class never reads a clock, so the host simulator
drives it with a virtual one.
"""
from tssbfw.limiter import TxRefused

MAX_QUEUE = 10    # SCHED_MAX (LIB/sched.h)
GAP_MS = 250      # 4 slots per second: 250 ms + rand(0..299) ms (LIB/sched.cpp:42)
JITTER_MS = 300
IDLE_SLOT_MS = GAP_MS + JITTER_MS // 2   # mean slot length: the wait for the next slot
DATA_FRAME = 124   # a 120-byte entry or chunk with its CRC32
BURST = (50, 100)  # gap and jitter between data frames sent back to back (see above)


class Scheduler:
    def __init__(self, airtime_ms, limiter, rand, max_queue=MAX_QUEUE,
                 gap_ms=GAP_MS, jitter_ms=JITTER_MS, idle_slot_ms=IDLE_SLOT_MS, burst=BURST):
        """Args:
            airtime_ms: function(frame_length) -> ms on air (regions/airtime).
            limiter: a limiter.TxLimiter.
            rand: function(n) -> int in 0..n-1 (injected so runs can be reproduced).
            idle_slot_ms: a frame queued while idle waits rand(idle_slot_ms) (0: none).
            burst: (gap, jitter) after a data frame followed by one, or None.
        """
        self._air = airtime_ms
        self._lim = limiter
        self._rand = rand
        self.max_queue = max_queue
        self.gap = gap_ms
        self.jitter = jitter_ms
        self.idle_slot = idle_slot_ms   # 0: a frame queued while idle goes at once
        self.burst = burst              # (gap, jitter) between data frames, or None
        self._q = []
        self._next = 0
        self._fresh = False   # the queue filled up again after being empty
        self.counters = {"queued": 0, "sent": 0, "duplicate": 0, "queue_full": 0,
                         "refused": 0, "limited": 0}
        self.last_wait_ms = 0

    def __len__(self):
        return len(self._q)

    def push(self, frame):
        """Queue a frame for sending.

        Returns:
            None when queued, else the drop reason: 'duplicate' or 'queue_full'.
        """
        frame = bytes(frame)
        if frame in self._q:
            self.counters["duplicate"] += 1
            return "duplicate"
        if len(self._q) >= self.max_queue:
            self.counters["queue_full"] += 1
            return "queue_full"
        if not self._q:
            self._fresh = True
        self._q.append(frame)
        self.counters["queued"] += 1
        return None

    def _slot(self, now_ms):
        if self._fresh:
            self._fresh = False
            if self._next <= now_ms:
                self._next = now_ms + (self._rand(self.idle_slot) if self.idle_slot else 0)

    def due_in(self, now_ms):
        """Milliseconds until pop() may return a frame; None when the queue is empty."""
        if not self._q:
            return None
        self._slot(now_ms)
        return max(0, self._next - now_ms)

    def pop(self, now_ms):
        """The frame to transmit now, or None (queue empty, slot not reached, or the
        limiter asked for a wait; `last_wait_ms` then holds that wait).

        A popped frame is booked with the limiter as starting at now_ms, and the next
        slot is placed after its airtime plus the jittered gap. Frames the limiter
        refuses outright (dwell time, budget) are dropped and counted as 'refused'.
        """
        self._slot(now_ms)
        while self._q:
            if now_ms < self._next:
                return None
            frame = self._q[0]
            air = self._air(len(frame))
            try:
                wait = self._lim.wait_ms(air, now_ms)
            except TxRefused:
                self._q.pop(0)
                self.counters["refused"] += 1
                continue
            if wait > 0:
                self.counters["limited"] += 1
                self.last_wait_ms = wait
                self._next = now_ms + wait
                return None
            self._q.pop(0)
            self._lim.record(air, now_ms)
            if self.burst is not None and len(frame) == DATA_FRAME and self._q and \
                    len(self._q[0]) == DATA_FRAME:
                gap, jitter = self.burst
            else:
                gap, jitter = self.gap, self.jitter
            self._next = now_ms + air + gap + self._rand(jitter)
            self.counters["sent"] += 1
            return frame
        return None
