"""Heltec WiFi LoRa 32 V2: ESP32 + SX1276.

Radio: tinySSB hardware.h:17-18 `SX1276(SS, DI0=26, RST=14)` (tinyssb-wire.md 7.2);
SPI, DIO1, Vext (GPIO21, active low), LED and OLED from Heltec's V2 pin map.
"""
from tssb_boards._usb import CP210X

BOARD = {
    "name": "heltec-v2",
    "title": "Heltec WiFi LoRa 32 V2",
    "mcu": "esp32",
    "flash_offset": 0x1000,
    "micropython_board": "ESP32_GENERIC",
    "spi": {"id": 1, "sck": 5, "mosi": 27, "miso": 19, "baudrate": 2000000},
    "default_radio": "sx1276",
    "radios": {
        "sx1276": {"cs": 18, "dio0": 26, "dio1": 35, "reset": 14},
    },
    "power": {"kind": "vext", "pin": 21, "active_low": True},
    "led": 25,
    "oled": {"sda": 4, "scl": 15, "rst": 16, "addr": 0x3C},
    "usb": [CP210X],
    "sources": "tinySSB hardware.h (Heltec); Heltec WiFi LoRa 32 V2 pin map",
}
