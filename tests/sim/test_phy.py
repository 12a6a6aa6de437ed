"""Airtime (Semtech formula, values worked out by hand) and the link budget."""
import math

import pytest

from tssb.sim import phy
from tssbfw import regions
from tssbfw.airtime import plan_airtime_ms, time_on_air_us


def test_airtime_entry_frame_sf7_125k_by_hand():
    # 120-byte entry + 4-byte CRC = 124 bytes, SF7, 125 kHz, CR 4/5, preamble 8,
    # explicit header, radio CRC off, no LDRO:
    #   Tsym = 128 / 125000 s = 1.024 ms
    #   payload: ceil((8*124 - 4*7 + 28 + 0 - 0) / (4*7)) = ceil(992/28) = 36 blocks
    #            8 + 36 * 5 = 188 symbols
    #   total = (8 + 4.25 + 188) * 1.024 ms = 205.056 ms
    assert time_on_air_us(124, 7, 125000, 5, 8) == 205056
    assert plan_airtime_ms(regions.plan("US915.a"), 124) == 206   # rounded up


def test_airtime_want_frame_sf7_500k_by_hand():
    # 20-byte frame, SF7, 500 kHz: Tsym = 0.256 ms
    #   ceil((160 - 28 + 28) / 28) = ceil(5.71) = 6 blocks -> 8 + 30 = 38 symbols
    #   (12.25 + 38) * 0.256 = 12.864 ms
    assert time_on_air_us(20, 7, 500000, 5, 8) == 12864
    assert plan_airtime_ms(regions.plan("US915.c"), 20) == 13


def test_airtime_sf12_uses_low_data_rate_optimisation_by_hand():
    # SF12 at 125 kHz: Tsym = 32.768 ms > 16 ms, so DE = 1:
    #   ceil((8*20 - 48 + 28) / (4*(12-2))) = ceil(140/40) = 4 -> 8 + 4*5 = 28 symbols
    #   (12.25 + 28) * 32.768 = 1318.912 ms
    assert time_on_air_us(20, 12, 125000, 5, 8) == 1318912


def test_airtime_e22_plan_sf9_cr47_by_hand():
    # E22-868: SF9, 125 kHz, CR 4/7, 124 bytes: Tsym = 4.096 ms
    #   ceil((992 - 36 + 28) / 36) = ceil(27.33) = 28 -> 8 + 28*7 = 204 symbols
    #   (12.25 + 204) * 4.096 = 885.76 ms
    assert plan_airtime_ms(regions.plan("E22-868"), 124) == 886


def test_noise_floor_and_sensitivity():
    m = phy.LinkModel(regions.plan("US915.a"))
    nf = -174 + 10 * math.log10(125000) + 6
    assert m.noise_floor == pytest.approx(nf)
    assert m.sensitivity == pytest.approx(nf - 7.5)      # SF7 limit
    assert m.sensitivity == pytest.approx(-124.53, abs=0.01)
    m12 = phy.LinkModel(dict(regions.plan("US915.a"), sf=12))
    assert m12.sensitivity == pytest.approx(nf - 20.0)


def test_log_distance_path_loss():
    m = phy.LinkModel(regions.plan("US915.a"))
    assert m.path_loss_db(40) == pytest.approx(127.41)
    assert m.path_loss_db(10) == pytest.approx(127.41)            # clamped at d0
    assert m.path_loss_db(400) == pytest.approx(127.41 + 20.8)    # one decade
    assert m.mean_rssi(400, shadow_db=3.0) == pytest.approx(20 - 148.21 - 3.0)
    r = m.range_m()
    assert m.decodable(m.mean_rssi(r * 0.99))
    assert not m.decodable(m.mean_rssi(r * 1.01))


def test_capture_threshold_and_overlap():
    assert phy.captures(-100, -106)
    assert not phy.captures(-100, -105.9)
    assert not phy.captures(-106, -100)
    assert phy.overlaps(0, 10, 9, 20)
    assert not phy.overlaps(0, 10, 10, 20)   # back to back does not collide


def test_bad_model_parameters():
    with pytest.raises(ValueError):
        phy.LinkModel(regions.plan("US915.a"), exponent=0)
    with pytest.raises(ValueError):
        phy.LinkModel(dict(regions.plan("US915.a"), sf=4))


def test_summed_interference():
    assert phy.survives(-100, [])
    # one interferer: the pairwise rule, threshold included
    assert phy.survives(-100, [-106]) and not phy.survives(-100, [-105.9])
    # two at -108 sum to -104.99 dBm: 4.99 dB < 6
    assert not phy.survives(-100, [-108, -108])
    # two at -112 sum to -108.99: 8.99 dB
    assert phy.survives(-100, [-112, -112])
    # three at -110 sum to -105.23: 5.23 dB
    assert not phy.survives(-100, [-110, -110, -110])
    assert phy.survives(-100, [-110, -110, -110], capture_db=5.0)
    assert phy.dbm_to_mw(0) == 1.0 and phy.dbm_to_mw(-30) == pytest.approx(0.001)


def test_relevance_cut_off_below_sensitivity():
    m = phy.LinkModel(regions.plan("US915.a"))
    cut = m.sensitivity - m.capture_db - phy.IGNORE_MARGIN_DB
    assert m.relevant(cut) and not m.relevant(cut - 0.01)
    # it takes four signals at the cut-off (+6.02 dB) to break the weakest frame's capture
    assert phy.survives(m.sensitivity, [cut] * 3)
    assert not phy.survives(m.sensitivity, [cut] * 4)
