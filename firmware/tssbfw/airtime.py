"""LoRa time on air, from the Semtech formula (SX1276 datasheet 4.1.1.7, AN1200.13).

  Tsym     = 2**SF / BW
  Tpre     = (n_preamble + 4.25) * Tsym
  nPayload = 8 + max(ceil((8*PL - 4*SF + 28 + 16*CRC - 20*IH) / (4*(SF - 2*DE))) * (CR + 4), 0)
  Toa      = Tpre + nPayload * Tsym

PL is the PHY payload length in bytes, CRC 1 when the radio's payload CRC is on, IH 1 for
implicit header, DE 1 when low data rate optimisation is on, CR 1..4 for 4/5..4/8.
Everything is computed in integers (quarter symbols), so results are exact and identical
on CPython and MicroPython; times are rounded up, which keeps the limiter conservative.
"""

# Low data rate optimisation is mandated when a symbol lasts longer than 16 ms
# (SX1276 datasheet 4.1.1.6); e.g. SF11 and SF12 at 125 kHz, SF12 at 250 kHz.
LDRO_SYMBOL_US = 16000


def symbol_us(sf, bw_hz):
    """Duration of one symbol in microseconds (float-free, rounded down)."""
    return ((1 << sf) * 1000000) // bw_hz


def ldro_required(sf, bw_hz):
    """True when the low data rate optimisation rule switches LDRO on."""
    return (1 << sf) * 1000000 > LDRO_SYMBOL_US * bw_hz


def payload_symbols(length, sf, cr, crc=False, explicit=True, ldro=None, bw_hz=125000):
    """Number of payload symbols (the nPayload term above).

    Args:
        length: PHY payload bytes (0..255).
        sf: spreading factor 5..12; cr: coding rate denominator 5..8 (4/5..4/8).
        crc: radio payload CRC on; explicit: explicit header; ldro: None = by rule.
    Returns:
        int symbols.
    Raises:
        ValueError on out-of-range settings.
    """
    _check(length, sf, cr, bw_hz)
    de = ldro_required(sf, bw_hz) if ldro is None else bool(ldro)
    num = 8 * length - 4 * sf + 28 + (16 if crc else 0) - (0 if explicit else 20)
    den = 4 * (sf - 2 * (1 if de else 0))
    blocks = -(-num // den) if num > 0 else 0  # ceil for positive numerators
    return 8 + blocks * (cr + 4)


def time_on_air_us(length, sf, bw_hz, cr=5, preamble=8, crc=False, explicit=True, ldro=None):
    """Time on air of one frame in microseconds, rounded up.

    Args:
        length: PHY payload bytes; sf: 5..12; bw_hz: bandwidth in Hz; cr: 5..8 (4/cr);
        preamble: programmed preamble symbols; crc, explicit, ldro as in payload_symbols.
    Returns:
        int microseconds.
    Raises:
        ValueError on out-of-range settings.
    """
    n = payload_symbols(length, sf, cr - 4, crc, explicit, ldro, bw_hz)
    quarters = 4 * preamble + 17 + 4 * n  # (preamble + 4.25 + n) * 4
    num = quarters * (1 << sf) * 1000000
    den = 4 * bw_hz
    return -(-num // den)


def time_on_air_ms(length, sf, bw_hz, cr=5, preamble=8, crc=False, explicit=True, ldro=None):
    """As time_on_air_us, in whole milliseconds rounded up."""
    us = time_on_air_us(length, sf, bw_hz, cr, preamble, crc, explicit, ldro)
    return -(-us // 1000)


def plan_airtime_ms(plan, length):
    """Time on air of a `length`-byte frame under a region plan (see regions.py)."""
    return time_on_air_ms(length, plan["sf"], plan["bw"], plan["cr"], plan["preamble"],
                          plan.get("crc", False), True, None)


def _check(length, sf, cr, bw_hz):
    if not 0 <= length <= 255:
        raise ValueError("payload length out of range")
    if not 5 <= sf <= 12:
        raise ValueError("spreading factor out of range")
    if not 1 <= cr <= 4:
        raise ValueError("coding rate out of range")
    if bw_hz <= 0:
        raise ValueError("bandwidth out of range")
