"""Radio plans of the deployed tinySSB nodes and the legal limits of their bands.

Plans follow tinySSBlib `LIB/config-tSSB.cpp:12-28` (tinyssb-wire.md 7.1): sync word 0x58,
preamble 8, CR 4/5, TX power 20 dBm, radio CRC off (frames carry their own CRC32),
explicit header. The E22-868 plan keeps the deployed sync word 0x12 and CR 4/7.

Each plan names a `rule`, the band's regulatory limits the transmit limiter enforces:
  duty_permille  share of airtime allowed in a sliding window (ETSI EN 300 220 sub-bands)
  window_ms      the sliding window (one hour for the ETSI duty cycle)
  dwell_ms       longest single transmission (FCC 15.247 400 ms dwell time)
  max_dbm        conducted power cap applied to the plan's power
"""

SYNC_WORD = 0x58      # tinySSB "SB" sync word (config-tSSB.cpp)
PREAMBLE = 8          # io.cpp setPreambleLength(8)
TX_POWER_DBM = 20     # config-tSSB.cpp
DEFAULT_PLAN = "US915.a"  # config-tSSB.cpp:50-51

HOUR_MS = 3600000

RULES = {
    # ETSI EN 300 220 band M, 868.0-868.6 MHz: 1% duty cycle, 25 mW ERP (14 dBm).
    "EU868": {"duty_permille": 10, "window_ms": HOUR_MS, "dwell_ms": None, "max_dbm": 14},
    # ETSI 433.05-434.79 MHz: 10% duty cycle, 10 mW ERP (10 dBm).
    "EU433": {"duty_permille": 100, "window_ms": HOUR_MS, "dwell_ms": None, "max_dbm": 10},
    # FCC 15.247 902-928 MHz: 400 ms dwell time per transmission, up to 30 dBm.
    "US915": {"duty_permille": None, "window_ms": None, "dwell_ms": 400, "max_dbm": 30},
    # ACMA LIPD class licence 915-928 MHz: no duty cycle or dwell limit, up to 30 dBm EIRP.
    "AU915": {"duty_permille": None, "window_ms": None, "dwell_ms": None, "max_dbm": 30},
}


def _plan(freq_hz, bw_hz, sf, cr, rule, sync=SYNC_WORD):
    return {"freq": freq_hz, "bw": bw_hz, "sf": sf, "cr": cr, "sync": sync,
            "preamble": PREAMBLE, "power": TX_POWER_DBM, "crc": False, "rule": rule}


PLANS = {
    "US915.a": _plan(904600000, 125000, 7, 5, "US915"),
    "US915.b": _plan(904600000, 250000, 7, 5, "US915"),
    "US915.c": _plan(904600000, 500000, 7, 5, "US915"),
    "AU915.a": _plan(917500000, 125000, 7, 5, "AU915"),
    "AU915.b": _plan(917500000, 250000, 7, 5, "AU915"),
    "EU868.a": _plan(868300000, 125000, 7, 5, "EU868"),
    "EU868.b": _plan(868300000, 250000, 7, 5, "EU868"),
    "EU868.c": _plan(868300000, 500000, 7, 5, "EU868"),
    "EU433.a": _plan(433300000, 125000, 7, 5, "EU433"),
    # "E22-compatible" plan, tinySSBlib commit of 2025-01-21: SF9, CR 4/7, sync 0x12.
    "E22-868": _plan(868200000, 125000, 9, 7, "EU868", sync=0x12),
}


def names():
    """Plan names, sorted."""
    return sorted(PLANS)


def plan(name, power=None, sf=None):
    """The plan called `name` (a copy, with `name`, `rule` limits and capped `power`).

    Args:
        power, sf: override the plan's TX power (dBm, still capped by the band's
            max_dbm) and spreading factor; None keeps the plan's.
    Raises:
        ValueError: unknown plan name.
    """
    p = PLANS.get(name)
    if p is None:
        raise ValueError("unknown region plan %r (one of %s)" % (name, ", ".join(names())))
    out = dict(p)
    out["name"] = name
    out["limits"] = dict(RULES[p["rule"]])
    if sf is not None:
        out["sf"] = sf
    out["power"] = min(p["power"] if power is None else power, out["limits"]["max_dbm"])
    return out


def lora_cfg(p):
    """The micropython-lib `lora` configure() dict for a plan.

    Keys per the driver README "Configuration Keys": bw is a string in kHz; coding_rate
    5..8 means 4/5..4/8; the 8-bit syncword is translated by the SX126x driver.
    """
    bw = p["bw"]
    bw_s = str(bw // 1000) if bw % 1000 == 0 else str(bw / 1000)
    return {
        "freq_khz": p["freq"] // 1000,
        "sf": p["sf"],
        "bw": bw_s,
        "coding_rate": p["cr"],
        "preamble_len": p["preamble"],
        "syncword": p["sync"],
        "output_power": p["power"],
        "crc_en": bool(p.get("crc", False)),
        "implicit_header": False,
    }
