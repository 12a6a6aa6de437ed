import pytest
from hypothesis import given, settings, strategies as st

from tssbfw import regions
from tssbfw.limiter import TxLimiter, TxRefused

EU = regions.plan("EU868.a")["limits"]
US = regions.plan("US915.a")["limits"]


def test_eu868_one_percent_of_an_hour():
    lim = TxLimiter(EU)
    assert lim.budget == 36000
    for i in range(100):          # 100 x 360 ms = 36 s: exactly the hourly budget
        assert lim.wait_ms(360, i * 1000) == 0
        lim.record(360, i * 1000)
    # the next frame waits until the first booking (t=0) leaves the hour window
    assert lim.wait_ms(360, 100000) == 3600000 - 100000
    assert lim.wait_ms(360, 3599999) == 1
    assert lim.wait_ms(360, 3600000) == 0
    assert lim.used_ms(3600000) == 36000 - 360


def test_wait_frees_just_enough_oldest_bookings():
    lim = TxLimiter({"duty_permille": 10, "window_ms": 60000})   # budget 600 ms
    for t in (0, 10, 20):
        lim.record(200, t)
    # 250 ms needs two 200 ms bookings gone: the second leaves at 10 + 60000
    assert lim.wait_ms(250, 30) == 10 + 60000 - 30
    assert lim.wait_ms(200, 30) == 0 + 60000 - 30
    assert lim.waits == 2


def test_us915_dwell_time():
    lim = TxLimiter(US)
    assert lim.wait_ms(400, 0) == 0
    for t in range(0, 100000, 100):   # no duty cycle: back to back is fine
        lim.record(400, t)
        assert lim.wait_ms(400, t) == 0
    with pytest.raises(TxRefused) as e:
        lim.wait_ms(401, 0)
    assert e.value.reason == "dwell"


def test_frame_longer_than_budget_refused():
    lim = TxLimiter({"duty_permille": 1, "window_ms": 100000})  # 100 ms budget
    with pytest.raises(TxRefused) as e:
        lim.wait_ms(101, 0)
    assert e.value.reason == "budget"


def _window_ok(sent, window, budget):
    # the busiest window ends at some transmission's start
    for t, _ in sent:
        if sum(a for s, a in sent if t - window < s <= t) > budget:
            return False
    return True


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 300), st.integers(0, 5000)), min_size=1,
                max_size=60),
       st.sampled_from([3, 8, 256]))
def test_never_exceeds_budget_and_waits_are_minimal(frames, history):
    window, budget = 20000, 1000
    lim = TxLimiter({"duty_permille": 50, "window_ms": window}, max_history=history)
    now = 0
    sent = []
    for air, gap in frames:
        now += gap
        w = lim.wait_ms(air, now)
        if w and history >= len(frames):
            # exact history: one ms earlier would break the window
            earlier = sent + [(now + w - 1, air)]
            assert not _window_ok(earlier, window, budget)
        now += w
        assert lim.wait_ms(air, now) == 0
        lim.record(air, now)
        sent.append((now, air))
        assert _window_ok(sent, window, budget)
