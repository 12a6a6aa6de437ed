"""Board definitions are complete and consistent, and each builds a modem (fakes)."""
import pytest

import tssb_boards

ESP32_GPIOS = set(range(0, 40)) - {20, 24, 28, 29, 30, 31}
ESP32S3_GPIOS = set(range(0, 49)) - {22, 23, 24, 25}
INPUT_ONLY = {"esp32": {34, 35, 36, 37, 38, 39}, "esp32s3": set()}
REQUIRED = {"sx126x": ("cs", "busy", "dio1", "reset", "tcxo_mv", "dio2_rf_sw"),
            "sx127x": ("cs", "dio0", "reset")}


@pytest.mark.parametrize("name", tssb_boards.names())
def test_board_complete_and_pins_valid(name):
    b = tssb_boards.BOARDS[name]
    for key in ("name", "title", "mcu", "flash_offset", "micropython_board", "spi", "radios",
                "default_radio", "power", "led", "oled", "usb", "sources"):
        assert key in b, key
    assert b["name"] == name
    assert b["mcu"] in ("esp32", "esp32s3")
    # MicroPython images: 0x1000 on the ESP32, 0x0 on the ESP32-S3 (board.json)
    assert b["flash_offset"] == (0x1000 if b["mcu"] == "esp32" else 0x0)
    assert b["default_radio"] in b["radios"]
    gpios = ESP32_GPIOS if b["mcu"] == "esp32" else ESP32S3_GPIOS
    spi = b["spi"]
    assert spi["id"] in (1, 2)
    for chip, pins in b["radios"].items():
        fam = tssb_boards.family(chip)
        for k in REQUIRED[fam]:
            assert k in pins, (chip, k)
        used = [spi["sck"], spi["mosi"], spi["miso"]] + \
            [v for k, v in pins.items() if k in ("cs", "busy", "dio0", "dio1", "reset")
             and v is not None]
        assert len(set(used)) == len(used), "pin used twice on %s/%s" % (name, chip)
        for p in used:
            assert p in gpios, (name, chip, p)
        # outputs cannot sit on input-only GPIOs
        for k in ("cs", "reset"):
            assert pins[k] not in INPUT_ONLY[b["mcu"]]
        assert spi["sck"] not in INPUT_ONLY[b["mcu"]]
        assert spi["mosi"] not in INPUT_ONLY[b["mcu"]]
        if fam == "sx126x":
            assert pins["tcxo_mv"] in (None, 1600, 1700, 1800, 2200, 2400, 2700, 3000, 3300)
    if b["power"]:
        assert b["power"]["kind"] in ("vext", "axp192")
    for vid, pid, what in b["usb"]:
        assert 0 < vid <= 0xFFFF and 0 < pid <= 0xFFFF and what


def test_registry_lookup_and_radio_variants():
    assert tssb_boards.names() == ["heltec-v2", "heltec-v3", "lora32-v21", "t3s3", "tbeam"]
    b = tssb_boards.get("tbeam:sx1262")
    assert b["radio"] == "sx1262" and b["lora"]["busy"] == 32
    assert tssb_boards.get("tbeam")["radio"] == "sx1276"
    with pytest.raises(ValueError, match="no radio"):
        tssb_boards.get("heltec-v3:sx1276")
    with pytest.raises(ValueError, match="unknown board"):
        tssb_boards.get("nope")
    assert "t3s3" in tssb_boards.by_usb(0x303A, 0x1001)
    assert tssb_boards.by_usb(0x1234, 0x5678) == []


def test_known_pins_from_reference():
    # ecosystem.md 1.4: Heltec V3 SX1262 CS 8 / BUSY 13 / DIO1 14 / RST 12, TCXO 1.8 V
    h = tssb_boards.get("heltec-v3")["lora"]
    assert (h["cs"], h["busy"], h["dio1"], h["reset"], h["tcxo_mv"]) == (8, 13, 14, 12, 1800)
    t = tssb_boards.get("t3s3")
    assert (t["spi"]["sck"], t["spi"]["miso"], t["spi"]["mosi"]) == (5, 3, 6)
    assert tssb_boards.get("tbeam")["power"]["kind"] == "axp192"


ALL_SPECS = ["%s:%s" % (n, c) for n in tssb_boards.names()
             for c in sorted(tssb_boards.BOARDS[n]["radios"])]


@pytest.mark.parametrize("spec", ALL_SPECS)
@pytest.mark.parametrize("use_async", [True, False])
def test_every_board_builds_a_configured_modem(spec, use_async):
    import lora
    import machine
    from tssbfw import regions
    from tssbfw.radio import SyncModem, make_modem
    b = tssb_boards.get(spec)
    m = make_modem(b, regions.plan("EU868.b"), lora, machine, use_async=use_async)
    drv = m if use_async else m.modem
    if not use_async:
        assert isinstance(m, SyncModem)
    assert type(drv).__name__.lower().endswith(b["radio"])
    assert drv.cfg["freq_khz"] == 868300 and drv.cfg["bw"] == "250"
    assert drv.cfg["syncword"] == 0x58 and drv.cfg["crc_en"] is False
    assert drv.pins["cs"] == b["lora"]["cs"] and drv.pins["reset"] == b["lora"]["reset"]
    if tssb_boards.family(b["radio"]) == "sx126x":
        assert drv.pins["busy"] == b["lora"]["busy"] and drv.tcxo_mv == b["lora"]["tcxo_mv"]
    else:
        assert drv.pins["dio0"] == b["lora"]["dio0"]
