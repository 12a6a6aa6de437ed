"""Heltec WiFi LoRa 32 V3: ESP32-S3 + SX1262 with a 1.8 V TCXO, DIO2 as RF switch.

Pins: Meshtastic variants/esp32s3/heltec_v3/variant.h, cross-checked with RNode
Boards.h (HELTEC32_V3) and tinySSB hardware.h:44-51 (ecosystem.md 1.4, tinyssb-wire.md
7.2). Vext (GPIO36, active low) powers the OLED and the antenna boost.
"""
from tssb_boards._usb import CP210X

BOARD = {
    "name": "heltec-v3",
    "title": "Heltec WiFi LoRa 32 V3",
    "mcu": "esp32s3",
    "flash_offset": 0x0,
    "micropython_board": "ESP32_GENERIC_S3",
    "spi": {"id": 1, "sck": 9, "mosi": 10, "miso": 11, "baudrate": 2000000},
    "default_radio": "sx1262",
    "radios": {
        "sx1262": {"cs": 8, "busy": 13, "dio1": 14, "reset": 12,
                   "dio2_rf_sw": True, "tcxo_mv": 1800},
    },
    "power": {"kind": "vext", "pin": 36, "active_low": True},
    "led": 35,
    "oled": {"sda": 17, "scl": 18, "rst": 21, "addr": 0x3C},
    "usb": [CP210X],
    "sources": "Meshtastic heltec_v3/variant.h; RNode Boards.h HELTEC32_V3",
}
