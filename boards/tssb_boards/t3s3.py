"""LilyGO T3-S3: ESP32-S3 with an SX1262 (1.8 V TCXO, DIO2 RF switch) or an SX127x.

Pins: Meshtastic variants/esp32s3/tlora_t3s3_v1/variant.h, RNode BOARD_T3S3 and
MicroPython's LILYGO_T3_S3 pins.csv / t3s3.py (ecosystem.md 1.4). Native USB.
OLED on I2C 18/17, LED GPIO37.
"""
from tssb_boards._usb import ESP32S3_USB

BOARD = {
    "name": "t3s3",
    "title": "LilyGO T3-S3",
    "mcu": "esp32s3",
    "flash_offset": 0x0,
    "micropython_board": "LILYGO_T3_S3",
    "spi": {"id": 1, "sck": 5, "mosi": 6, "miso": 3, "baudrate": 2000000},
    "default_radio": "sx1262",
    "radios": {
        "sx1262": {"cs": 7, "busy": 34, "dio1": 33, "reset": 8,
                   "dio2_rf_sw": True, "tcxo_mv": 1800},
        "sx1276": {"cs": 7, "dio0": 9, "dio1": 33, "reset": 8},
    },
    "power": None,
    "led": 37,
    "oled": {"sda": 18, "scl": 17, "rst": None, "addr": 0x3C},
    "usb": [ESP32S3_USB],
    "sources": "Meshtastic tlora_t3s3_v1/variant.h; RNode BOARD_T3S3; MicroPython LILYGO_T3_S3",
}
