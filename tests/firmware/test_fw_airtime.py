"""Airtime against values worked out by hand from the Semtech formula.

Each case spells out the payload-symbol count n and the symbol time so the expected
number is checkable on paper: Toa = (preamble + 4.25 + n) * 2**SF / BW.
"""
import pytest

from tssbfw import airtime, regions


@pytest.mark.parametrize("length,sf,bw,cr,crc,explicit,ldro,n_sym,expect_us", [
    # 124-byte frame (120 + CRC32), SF7/125k 4/5: ceil((992-28+28)/28)=36 -> 8+36*5=188
    # symbols of 1.024 ms: (12.25+188)*1.024 = 205.056 ms (reference: ~205 ms)
    (124, 7, 125000, 5, False, True, None, 188, 205056),
    (124, 7, 250000, 5, False, True, None, 188, 102528),
    (124, 7, 500000, 5, False, True, None, 188, 51264),
    # SF9/125k 4/7: ceil((992-36+28)/36)=28 -> 8+28*7=204 symbols of 4.096 ms = 885.76 ms
    (124, 9, 125000, 7, False, True, None, 204, 885760),
    # 44 bytes SF7/125k: ceil(352/28)=13 -> 73 symbols: 85.25*1.024 = 87.296 ms
    (44, 7, 125000, 5, False, True, None, 73, 87296),
    # SF12/125k, CRC on: symbol 32.768 ms > 16 ms so LDRO, divisor 4*(12-2)=40:
    # ceil((992-48+28+16)/40)=25 -> 8+25*5=133; 145.25*32.768 = 4759.552 ms
    (124, 12, 125000, 5, True, True, None, 133, 4759552),
    # same without LDRO (forced off): ceil(988/48)=21 -> 113; 125.25*32.768 = 4104.192 ms
    (124, 12, 125000, 5, True, True, False, 113, 4104192),
    # implicit header, CRC on, 10 bytes SF7: ceil((80-28+28+16-20)/28)=3 -> 23 symbols
    (10, 7, 125000, 5, True, False, None, 23, 36096),
    # empty implicit payload at SF12: numerator negative -> just the 8 fixed symbols
    (0, 12, 500000, 5, False, False, False, 8, 165888),
])
def test_hand_computed(length, sf, bw, cr, crc, explicit, ldro, n_sym, expect_us):
    assert airtime.payload_symbols(length, sf, cr - 4, crc, explicit, ldro, bw) == n_sym
    assert airtime.time_on_air_us(length, sf, bw, cr, 8, crc, explicit, ldro) == expect_us
    assert airtime.time_on_air_ms(length, sf, bw, cr, 8, crc, explicit, ldro) == \
        -(-expect_us // 1000)


def test_ldro_rule():
    # symbol > 16 ms: SF11 and SF12 at 125 kHz, SF12 at 250 kHz; not SF10/125, SF11/250
    assert airtime.ldro_required(11, 125000)
    assert airtime.ldro_required(12, 125000)
    assert airtime.ldro_required(12, 250000)
    assert not airtime.ldro_required(10, 125000)
    assert not airtime.ldro_required(11, 250000)


def test_preamble_adds_whole_symbols():
    a = airtime.time_on_air_us(50, 7, 125000, 5, preamble=8)
    b = airtime.time_on_air_us(50, 7, 125000, 5, preamble=16)
    assert b - a == 8 * 1024


def test_monotonic_in_length():
    prev = 0
    for n in range(0, 256):
        t = airtime.time_on_air_us(n, 8, 125000, 5)
        assert t >= prev
        prev = t


@pytest.mark.parametrize("args", [(256, 7, 125000), (-1, 7, 125000), (10, 4, 125000),
                                  (10, 13, 125000), (10, 7, 0)])
def test_rejects_bad_settings(args):
    with pytest.raises(ValueError):
        airtime.time_on_air_us(*args)


def test_plan_airtime_matches_reference_table():
    # tinyssb-wire.md 7.1: 124-byte frame ~205 / ~103 / ~51 ms, E22-868 ~886 ms
    want = {"US915.a": 206, "EU868.b": 103, "EU868.c": 52, "E22-868": 886}
    for name, ms in want.items():
        assert airtime.plan_airtime_ms(regions.plan(name), 124) == ms
