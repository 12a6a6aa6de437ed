"""LilyGO TTGO LoRa32 V2.1 (T3 v1.6/1.6.1): ESP32 + SX1276.

Pins: Meshtastic variants/esp32/tlora_v2_1_16/variant.h, RNode LORA32_V2_1 and
MicroPython's LILYGO_TTGO_LORA32 lora32.py (reset 23; v1.0 boards use 14)
(ecosystem.md 1.4). OLED on I2C 21/22, LED GPIO25.
"""
from tssb_boards._usb import CH9102, CP210X

BOARD = {
    "name": "lora32-v21",
    "title": "LilyGO TTGO LoRa32 V2.1",
    "mcu": "esp32",
    "flash_offset": 0x1000,
    "micropython_board": "LILYGO_TTGO_LORA32",
    "spi": {"id": 1, "sck": 5, "mosi": 27, "miso": 19, "baudrate": 2000000},
    "default_radio": "sx1276",
    "radios": {
        "sx1276": {"cs": 18, "dio0": 26, "dio1": 33, "reset": 23},
    },
    "power": None,
    "led": 25,
    "oled": {"sda": 21, "scl": 22, "rst": None, "addr": 0x3C},
    "usb": [CH9102, CP210X],
    "sources": "Meshtastic tlora_v2_1_16/variant.h; RNode LORA32_V2_1; MicroPython lora32.py",
}
