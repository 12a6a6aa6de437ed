"""Collisions, capture, half-duplex, sensitivity and random loss on the virtual channel.

Frames are injected at times before the nodes' own timers first fire (500 ms), so only
the injected frames are on air; outcomes are read from the simulator's trace.
"""
import pytest

from tinyssb.frames import add_crc
from tssb.sim import phy
from tssbfw.airtime import plan_airtime_ms

from tssb.sim import Simulator, scenario

from sim_helpers import quiet_sim

FRAME_A = add_crc(b"A" * 7 + b"payload-a")
FRAME_B = add_crc(b"B" * 7 + b"payload-b")


def outcomes(sim, dst):
    return {src: o for _, src, d, o in sim.trace if d == dst}


def test_lone_frame_is_delivered_after_its_airtime():
    sim = quiet_sim([(0, 0), (100, 0)])
    sim.transmit(0, FRAME_A, 100)
    sim.run()
    air = plan_airtime_ms(sim.plan, len(FRAME_A))
    assert (100 + air, 0, 1, "ok") in sim.trace
    assert sim.boards[1].fw.port.counters["rx"] >= 1


def test_equal_power_overlap_destroys_both():
    # receiver 2 halfway between 0 and 1: same RSSI from both
    sim = quiet_sim([(0, 0), (200, 0), (100, 0)])
    sim.transmit(0, FRAME_A, 100)
    sim.transmit(1, FRAME_B, 120)
    sim.run()
    got = outcomes(sim, 2)
    assert got[0] == "collision" and got[1] == "collision"


def test_stronger_frame_captures_the_channel():
    # receiver 2 at 50 m from 0 and 200 m from 1: ~12.5 dB apart (threshold 6 dB),
    # and frame B alone would be decodable there
    sim = quiet_sim([(0, 0), (250, 0), (50, 0)])
    assert sim.model.decodable(sim.model.mean_rssi(200))
    sim.transmit(0, FRAME_A, 100)
    sim.transmit(1, FRAME_B, 110)
    sim.run()
    got = outcomes(sim, 2)
    assert got[0] == "ok"
    assert got[1] == "collision"


def test_capture_threshold_is_a_scenario_parameter():
    # with a 20 dB threshold the same 12.5 dB difference no longer saves frame A
    sim = quiet_sim([(0, 0), (250, 0), (50, 0)], capture_db=20.0)
    sim.transmit(0, FRAME_A, 100)
    sim.transmit(1, FRAME_B, 110)
    sim.run()
    assert outcomes(sim, 2) == {0: "collision", 1: "collision"}


def test_back_to_back_frames_do_not_collide():
    sim = quiet_sim([(0, 0), (200, 0), (100, 0)])
    air = plan_airtime_ms(sim.plan, len(FRAME_A))
    sim.transmit(0, FRAME_A, 100)
    sim.transmit(1, FRAME_B, 100 + air)
    sim.run()
    assert outcomes(sim, 2) == {0: "ok", 1: "ok"}


def test_half_duplex_receiver_that_starts_sending_loses_the_frame():
    sim = quiet_sim([(0, 0), (100, 0)])
    sim.transmit(0, FRAME_A, 100)
    sim.transmit(1, FRAME_B, 150)     # board 1 starts sending while A arrives
    sim.run()
    assert outcomes(sim, 1)[0] == "half_duplex"
    assert outcomes(sim, 0)[1] == "half_duplex"  # and 0 was still sending A


def test_half_duplex_frame_arriving_during_own_transmission_is_lost():
    sim = quiet_sim([(0, 0), (100, 0), (60, 50)])
    sim.transmit(1, FRAME_B, 100)     # board 1 busy from 100 ms
    sim.transmit(0, FRAME_A, 150)     # A reaches 1 while it transmits
    sim.run()
    assert outcomes(sim, 1)[0] == "half_duplex"


def test_far_node_is_neither_attempt_nor_delivery():
    sim = quiet_sim([(0, 0), (5000, 0)])
    sim.transmit(0, FRAME_A, 100)
    sim.run()
    assert sim.trace == []
    assert sim.attempts == 0


def test_weak_interferer_below_capture_margin_is_harmless():
    # interferer 1 at 3 km: far below the receiver's noise, more than 6 dB under A
    sim = quiet_sim([(0, 0), (3000, 0), (50, 0)])
    sim.transmit(0, FRAME_A, 100)
    sim.transmit(1, FRAME_B, 110)
    sim.run()
    assert outcomes(sim, 2) == {0: "ok"}


def test_random_loss_drops_every_frame_at_probability_one():
    sim = quiet_sim([(0, 0), (100, 0)], loss=1.0)
    sim.transmit(0, FRAME_A, 100)
    sim.run()
    assert outcomes(sim, 1) == {0: "loss"}
    assert sim.delivered == 0 and sim.lost["loss"] >= 1


def test_received_frames_reach_the_firmware_port_with_rssi_and_snr():
    lines = []
    sim = quiet_sim([(0, 0), (100, 0)])
    sim.boards[1].events.dev = _Collect(lines)
    sim.transmit(0, FRAME_A, 100)
    sim.run()
    rx = [f for e, f in lines if e == "rx"][0]
    want = sim.model.mean_rssi(100)
    assert rx["rssi"] == round(want)
    assert abs(rx["snr"] - (want - sim.model.noise_floor)) <= 0.125
    assert rx["airtime_ms"] == plan_airtime_ms(sim.plan, len(FRAME_A))


class _Collect:
    def __init__(self, out):
        self.out = out

    def emit(self, event, **fields):
        self.out.append((event, fields))


# -- summed interference: several frames on air at once ----------------------------------

FRAME_C = add_crc(b"C" * 7 + b"payload-c")
LONG_W = add_crc(b"W" * 7 + bytes(100))   # a wanted frame several short ones can overlap


def interferer_distance(below_db, d_wanted=50.0):
    """Distance at which a frame arrives below_db weaker than one from d_wanted."""
    return d_wanted * 10 ** (below_db / (10 * phy.PATH_LOSS_EXPONENT))


def three_senders(below_db):
    """Receiver 3 at the origin; wanted sender 0 at 50 m; interferers 1 and 2 each
    below_db weaker there (and far enough apart to matter to nobody else)."""
    d = interferer_distance(below_db)
    sim = quiet_sim([(50, 0), (-d, 0), (0, d), (0, 0)])
    m = sim.model
    assert m.mean_rssi(50) - m.mean_rssi(d) == pytest.approx(below_db)
    return sim


def test_one_interferer_8db_below_is_captured():
    sim = three_senders(8.0)
    sim.transmit(0, FRAME_A, 100)
    sim.transmit(1, FRAME_B, 105)
    sim.run()
    assert outcomes(sim, 3) == {0: "ok", 1: "collision"}


def test_two_interferers_8db_below_each_sum_to_5db_and_break_capture():
    # pairwise each is 8 dB under (capture 6 dB); summed: 8 - 10 log10(2) = 4.99 dB
    sim = three_senders(8.0)
    sim.transmit(0, FRAME_A, 100)
    sim.transmit(1, FRAME_B, 105)
    sim.transmit(2, FRAME_C, 110)
    sim.run()
    assert outcomes(sim, 3) == {0: "collision", 1: "collision", 2: "collision"}


def test_two_interferers_12db_below_each_still_leave_9db():
    sim = three_senders(12.0)
    sim.transmit(0, FRAME_A, 100)
    sim.transmit(1, FRAME_B, 105)
    sim.transmit(2, FRAME_C, 110)
    sim.run()
    assert outcomes(sim, 3) == {0: "ok", 1: "collision", 2: "collision"}


def test_interferers_that_follow_each_other_are_not_summed():
    # each overlaps part of the long wanted frame, but never both at once
    sim = three_senders(8.0)
    air_b = plan_airtime_ms(sim.plan, len(FRAME_B))
    assert plan_airtime_ms(sim.plan, len(LONG_W)) > 2 * air_b + 20
    sim.transmit(0, LONG_W, 100)
    sim.transmit(1, FRAME_B, 110)
    sim.transmit(2, FRAME_C, 110 + air_b)     # starts as B ends: back to back
    sim.run()
    assert outcomes(sim, 3) == {0: "ok", 1: "collision", 2: "collision"}


def test_partial_overlaps_sum_while_they_coincide():
    # B starts before the wanted frame and is still on air when C starts during it
    sim = three_senders(8.0)
    air_b = plan_airtime_ms(sim.plan, len(FRAME_B))
    sim.transmit(1, FRAME_B, 100)
    sim.transmit(0, LONG_W, 100 + air_b // 2)
    sim.transmit(2, FRAME_C, 100 + air_b - 1)
    sim.run()
    assert outcomes(sim, 3)[0] == "collision"


def test_partial_overlap_ending_before_the_next_leaves_the_frame():
    sim = three_senders(8.0)
    air_b = plan_airtime_ms(sim.plan, len(FRAME_B))
    sim.transmit(1, FRAME_B, 100)
    sim.transmit(0, LONG_W, 100 + air_b // 2)
    sim.transmit(2, FRAME_C, 100 + air_b)
    sim.run()
    assert outcomes(sim, 3)[0] == "ok"


def test_board_still_powered_off_neither_receives_nor_transmits():
    sc = scenario.from_dict({
        "name": "t", "seed": 5, "region": "US915.a", "duration_s": 30,
        "stop_when_converged": False, "boot_spread_s": 20,
        "topology": {"kind": "positions", "positions": [[0, 0], [100, 0], [200, 0]]},
        "radio": {"shadowing_sigma_db": 0.0}, "authors": {"nodes": [0]},
        "posts": {"per_author": 0, "start_s": 20},
        # deployed behaviour: its claims every 5 s keep the air busy (ours stays quiet)
        "deployed": {"nodes": [0, 1, 2]}})
    sim = Simulator(sc, trace=True)
    boot = sim.boot_ms
    assert len(set(boot)) == 3 and all(0 <= t < 20000 for t in boot)
    late = max(range(3), key=lambda i: boot[i])
    sim.run()
    # others were on air before the late board was on, yet it heard nothing before it
    heard = [t for t, _, dst, _ in sim.trace if dst == late]
    assert heard and min(heard) > boot[late]
    assert any(end < boot[late] for end, src, _, _ in sim.trace if src != late)
    # and no board sent before it was on
    first_tx = {}
    for end, src, _, _ in sim.trace:
        first_tx.setdefault(src, end)
    assert all(first_tx[i] > boot[i] for i in first_tx)
