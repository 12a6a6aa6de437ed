import random

from tssbfw import regions
from tssbfw.airtime import plan_airtime_ms
from tssbfw.limiter import TxLimiter
from tssbfw.scheduler import GAP_MS, JITTER_MS, MAX_QUEUE, Scheduler


def make(plan="US915.a", seed=1, **kw):
    p = regions.plan(plan)
    rnd = random.Random(seed)
    return Scheduler(lambda n: plan_airtime_ms(p, n), TxLimiter(p["limits"]),
                     lambda n: rnd.randrange(n), **kw)


def frame(i, n=40):
    return bytes([i]) * n


def test_bounded_queue_and_duplicates():
    s = make()
    for i in range(MAX_QUEUE):
        assert s.push(frame(i)) is None
    assert s.push(frame(3)) == "duplicate"
    assert s.push(frame(99)) == "queue_full"
    assert len(s) == MAX_QUEUE
    assert s.counters["duplicate"] == 1 and s.counters["queue_full"] == 1


def test_fifo_one_per_slot_with_jittered_gap():
    s = make()
    for i in range(5):
        s.push(frame(i))
    now = 0
    out = []
    gaps = []
    while len(s):
        due = s.due_in(now)
        now += due
        f = s.pop(now)
        assert f is not None
        assert s.pop(now) is None           # nothing else in the same slot
        air = plan_airtime_ms(regions.plan("US915.a"), len(f))
        gaps.append(s.due_in(now) if len(s) else None)
        out.append(f)
        last_air = air
    assert out == [frame(i) for i in range(5)]
    for g in gaps[:-1]:
        assert last_air + GAP_MS <= g < last_air + GAP_MS + JITTER_MS


def test_jitter_varies():
    s = make(seed=7)
    seen = set()
    now = 0
    for i in range(30):
        s.push(frame(i))
        now += s.due_in(now)
        s.pop(now)
        seen.add(s._next - now)
    assert len(seen) > 10


def test_duty_limit_queues_instead_of_sending():
    s = make("EU868.a")                       # 1% of an hour = 36 s
    air = plan_airtime_ms(regions.plan("EU868.a"), 124)   # 206 ms
    now = 0
    sent = 0
    i = 0
    while sent * air + air <= 36000:
        s.push(bytes([i % 256, i // 256]) * 62)
        i += 1
        now += s.due_in(now)
        assert s.pop(now) is not None
        sent += 1
    s.push(b"\xee" * 124)
    now += s.due_in(now)
    assert s.pop(now) is None                 # budget spent: it waits, stays queued
    assert s.counters["limited"] == 1 and len(s) == 1
    assert 3000000 < s.last_wait_ms <= 3600000
    assert s.due_in(now) == s.last_wait_ms
    now += s.due_in(now)
    assert s.pop(now) == b"\xee" * 124        # sent once the first frames left the hour


def test_refused_frame_is_dropped_not_blocking():
    s = make("US915.a")
    s._air = lambda n: 500 if n == 100 else 50   # pretend the first frame is 500 ms
    s.push(b"\x01" * 100)
    s.push(b"\x02" * 40)
    assert s.pop(s.due_in(0)) == b"\x02" * 40
    assert s.counters["refused"] == 1


def test_a_frame_queued_while_idle_waits_for_a_random_slot():
    # Slots tick while idle (ESP32): boards reacting to the same packet do not start at
    # the same instant.
    from tssbfw.scheduler import IDLE_SLOT_MS
    waits = set()
    for seed in range(20):
        s = make(seed=seed)
        s.push(frame(1))
        d = s.due_in(100000)
        assert 0 <= d < IDLE_SLOT_MS and s.pop(100000 + d) == frame(1)
        waits.add(d)
    assert len(waits) > 10


def test_data_frames_back_to_back_take_the_short_burst_gap():
    from tssbfw.scheduler import BURST, DATA_FRAME
    air = plan_airtime_ms(regions.plan("US915.a"), DATA_FRAME)
    for burst, lo, hi in ((BURST, BURST[0], sum(BURST)), (None, GAP_MS, GAP_MS + JITTER_MS)):
        s = make(burst=burst)
        s.push(frame(1, DATA_FRAME))    # an entry and its chunk
        s.push(frame(2, DATA_FRAME))
        s.push(frame(3))                # a WANT after them
        now = s.due_in(0)
        assert s.pop(now) == frame(1, DATA_FRAME)
        assert lo <= s.due_in(now) - air < hi
        now += s.due_in(now)
        assert s.pop(now) == frame(2, DATA_FRAME)
        # not before a small frame: the ESP32's slot
        assert GAP_MS <= s.due_in(now) - air < GAP_MS + JITTER_MS
