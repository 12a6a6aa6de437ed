from tssbfw import regions


def test_plans_match_deployed_table():
    # tinyssb-wire.md 7.1 (LIB/config-tSSB.cpp:12-28)
    table = {
        "US915.a": (904600000, 125000, 7, 5, 0x58), "US915.b": (904600000, 250000, 7, 5, 0x58),
        "US915.c": (904600000, 500000, 7, 5, 0x58), "AU915.a": (917500000, 125000, 7, 5, 0x58),
        "AU915.b": (917500000, 250000, 7, 5, 0x58), "EU868.a": (868300000, 125000, 7, 5, 0x58),
        "EU868.b": (868300000, 250000, 7, 5, 0x58), "EU868.c": (868300000, 500000, 7, 5, 0x58),
        "EU433.a": (433300000, 125000, 7, 5, 0x58), "E22-868": (868200000, 125000, 9, 7, 0x12),
    }
    assert set(regions.names()) == set(table)
    for name, (f, bw, sf, cr, sync) in table.items():
        p = regions.plan(name)
        assert (p["freq"], p["bw"], p["sf"], p["cr"], p["sync"]) == (f, bw, sf, cr, sync)
        assert p["preamble"] == 8 and p["crc"] is False


def test_power_capped_by_band():
    assert regions.plan("US915.a")["power"] == 20
    assert regions.plan("EU868.a")["power"] == 14
    assert regions.plan("EU433.a")["power"] == 10


def test_limits_per_region():
    assert regions.plan("EU868.b")["limits"]["duty_permille"] == 10
    assert regions.plan("EU868.b")["limits"]["window_ms"] == 3600000
    assert regions.plan("US915.c")["limits"]["dwell_ms"] == 400
    assert regions.plan("US915.c")["limits"]["duty_permille"] is None


def test_lora_cfg_keys_and_values():
    c = regions.lora_cfg(regions.plan("EU868.b"))
    assert c == {"freq_khz": 868300, "sf": 7, "bw": "250", "coding_rate": 5,
                 "preamble_len": 8, "syncword": 0x58, "output_power": 14, "crc_en": False,
                 "implicit_header": False}


def test_unknown_plan():
    import pytest
    with pytest.raises(ValueError, match="unknown region plan"):
        regions.plan("EU999")
