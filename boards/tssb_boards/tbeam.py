"""LilyGO T-Beam v1.x: ESP32 with an SX1276 or an SX1262; the radio is powered from the
AXP192's LDO2, which must be switched on over I2C (SDA 21, SCL 22) before it answers.

Pins: Meshtastic variants/esp32/tbeam/variant.h with the ESP32 SPI defaults 5/19/27/18,
RNode Boards.h BOARD_TBEAM and LilyGO's LILYGO_TBeam_V1_X example (ecosystem.md 1.4).
Reset is GPIO23 on v1.x (tinySSB hardware.h uses 14, which is the v0.7 board).
LDO2 at 3.3 V as Meshtastic Power.cpp sets it.
"""
from tssb_boards._usb import CH9102, CP210X

BOARD = {
    "name": "tbeam",
    "title": "LilyGO T-Beam v1.x",
    "mcu": "esp32",
    "flash_offset": 0x1000,
    "micropython_board": "ESP32_GENERIC",
    "spi": {"id": 1, "sck": 5, "mosi": 27, "miso": 19, "baudrate": 2000000},
    "default_radio": "sx1276",
    "radios": {
        "sx1276": {"cs": 18, "dio0": 26, "dio1": 33, "reset": 23},
        "sx1262": {"cs": 18, "busy": 32, "dio1": 33, "reset": 23,
                   "dio2_rf_sw": True, "tcxo_mv": 1800},
    },
    "power": {"kind": "axp192", "sda": 21, "scl": 22, "addr": 0x34, "ldo2_mv": 3300},
    "led": 4,
    "oled": {"sda": 21, "scl": 22, "rst": None, "addr": 0x3C},
    "usb": [CH9102, CP210X],
    "sources": "Meshtastic tbeam/variant.h; RNode Boards.h BOARD_TBEAM; LilyGO examples",
}
