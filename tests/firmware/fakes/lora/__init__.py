"""Fake micropython-lib `lora` package (drivers lora-sx126x / lora-sx127x with lora-sync
and lora-async), following the documented API (README; sx126x.py, sx127x.py, modem.py):

  SX1261/SX1262(spi, cs, busy, dio1=None, dio2_rf_sw=True, dio3_tcxo_millivolts=None,
                dio3_tcxo_start_time_us=1000, reset=None, lora_cfg=None, ant_sw=None)
  SX1276..SX1279(spi, cs, dio0=None, dio1=None, reset=None, lora_cfg=None, ant_sw=None)
  Async* variants with `await send()` / `await recv()`.
  configure(lora_cfg): keys of the README's "Configuration Keys"; defaults sf 7,
  coding_rate 5, bw "125"; freq_khz is required.
  send(packet, tx_at_ms=None) -> ticks; recv(timeout_ms=None, rx_length=0xFF,
  rx_packet=None) -> RxPacket or None. RxPacket is a bytearray with ticks_ms, snr
  (dB * 4), rssi (dBm) and valid_crc.

Frames travel over `fakeradio.ETHER` (or `ether=` given to the constructor).
"""
import asyncio
import time

import fakeradio
from machine import Pin

BANDWIDTHS = ("7.8", "10.4", "15.6", "20.8", "31.25", "41.7", "62.5", "125", "250", "500")
CONFIG_KEYS = ("freq_khz", "sf", "bw", "coding_rate", "output_power", "tx_ant",
               "implicit_header", "crc_en", "auto_image_cal", "syncword", "pa_ramp_us",
               "preamble_len", "invert_iq_tx", "invert_iq_rx", "rx_boost", "lna_gain")


class ConfigError(ValueError):
    pass


def _ticks():
    f = getattr(time, "ticks_ms", None)
    return f() if f else int(time.monotonic() * 1000)


class RxPacket(bytearray):
    def __init__(self, payload, ticks_ms=None, snr=None, rssi=None, valid_crc=True):
        super().__init__(payload)
        self.ticks_ms = ticks_ms
        self.snr = snr
        self.rssi = rssi
        self.valid_crc = valid_crc


class _Modem:
    FAMILY = None
    POWER = (-9, 22)
    SF = (5, 12)

    def _setup(self, spi, cs, lora_cfg, ether):
        if spi is None or not isinstance(cs, Pin):
            raise TypeError("spi and cs Pin are required")
        self.cfg = {"sf": 7, "coding_rate": 5, "bw": "125", "syncword": 0x12,
                    "preamble_len": 12, "implicit_header": False, "crc_en": True,
                    "output_power": 14}
        self.configured = False
        self.rxq = []
        self.sent = []
        self.rssi = -60
        self.snr = 40  # dB * 4
        self.ether = ether or fakeradio.ETHER
        self.ether.attach(self)
        if lora_cfg:
            self.configure(lora_cfg)

    def configure(self, lora_cfg):
        for k in lora_cfg:
            if k not in CONFIG_KEYS:
                raise ConfigError(k)
            if k == "tx_ant" and self.FAMILY != "sx127x":
                raise ConfigError(k)
        c = dict(self.cfg)
        c.update(lora_cfg)
        if "freq_khz" not in c:
            raise ConfigError("freq_khz")
        if not self.SF[0] <= c["sf"] <= self.SF[1]:
            raise ConfigError("sf")
        if c["bw"] not in BANDWIDTHS:
            raise ConfigError("bw")
        if not 5 <= c["coding_rate"] <= 8:
            raise ConfigError("coding_rate")
        if not self.POWER[0] <= c["output_power"] <= self.POWER[1]:
            raise ConfigError("output_power")
        if not 0 <= c["syncword"] <= 0xFFFF:
            raise ConfigError("syncword")
        self.cfg = c
        self.configured = True

    def air_key(self):
        return tuple(self.cfg.get(k) for k in fakeradio.MATCH_KEYS)

    def deliver(self, data):
        self.rxq.append(data)
        ev = getattr(self, "_ev", None)
        if ev is not None:
            ev.set()

    def _check_send(self, packet):
        if not self.configured:
            raise RuntimeError("not configured")
        if not 0 < len(packet) <= 255:
            raise ValueError("packet length")

    def _pop(self):
        d = self.rxq.pop(0)
        return RxPacket(d, _ticks(), self.snr, self.rssi, True)

    def get_time_on_air_us(self, payload_len):
        return 1000  # not modelled; the firmware computes airtime itself


class _SyncMixin:
    def send(self, packet, tx_at_ms=None):
        self._check_send(packet)
        self.sent.append(bytes(packet))
        self.ether.transmit(self, packet)
        return _ticks()

    def recv(self, timeout_ms=None, rx_length=0xFF, rx_packet=None):
        if self.rxq:
            return self._pop()
        if timeout_ms:
            time.sleep(min(timeout_ms, 5) / 1000)
        return self._pop() if self.rxq else None


class _AsyncMixin:
    async def send(self, packet, tx_at_ms=None):
        self._check_send(packet)
        self.sent.append(bytes(packet))
        await asyncio.sleep(0)
        self.ether.transmit(self, packet)
        return _ticks()

    async def recv(self, timeout_ms=None, rx_length=0xFF, rx_packet=None):
        if getattr(self, "_ev", None) is None:
            self._ev = asyncio.Event()
        while not self.rxq:
            self._ev.clear()
            if timeout_ms is None:
                await self._ev.wait()
            else:
                try:
                    await asyncio.wait_for(self._ev.wait(), timeout_ms / 1000)
                except asyncio.TimeoutError:
                    return None
        return self._pop()


class _SX126x(_Modem):
    FAMILY = "sx126x"

    def __init__(self, spi, cs, busy, dio1=None, dio2_rf_sw=True, dio3_tcxo_millivolts=None,
                 dio3_tcxo_start_time_us=1000, reset=None, lora_cfg=None, ant_sw=None,
                 ether=None):
        if not isinstance(busy, Pin):
            raise TypeError("busy Pin is required")
        if dio3_tcxo_millivolts is not None and not 1600 <= dio3_tcxo_millivolts <= 3300:
            raise ValueError("dio3_tcxo_millivolts")
        self.pins = {"busy": busy.id, "dio1": dio1 and dio1.id, "reset": reset and reset.id,
                     "cs": cs.id}
        self.tcxo_mv = dio3_tcxo_millivolts
        self.dio2_rf_sw = dio2_rf_sw
        self._setup(spi, cs, lora_cfg, ether)


class _SX127x(_Modem):
    FAMILY = "sx127x"
    POWER = (-4, 20)
    SF = (6, 12)

    def __init__(self, spi, cs, dio0=None, dio1=None, reset=None, lora_cfg=None,
                 ant_sw=None, ether=None):
        self.pins = {"dio0": dio0 and dio0.id, "dio1": dio1 and dio1.id,
                     "reset": reset and reset.id, "cs": cs.id}
        self._setup(spi, cs, lora_cfg, ether)


class SX1261(_SyncMixin, _SX126x):
    pass


class SX1262(_SyncMixin, _SX126x):
    pass


class SX1276(_SyncMixin, _SX127x):
    pass


class SX1277(SX1276):
    pass


class SX1278(SX1276):
    pass


class SX1279(SX1276):
    pass


class AsyncSX1261(_AsyncMixin, _SX126x):
    pass


class AsyncSX1262(_AsyncMixin, _SX126x):
    pass


class AsyncSX1276(_AsyncMixin, _SX127x):
    pass


class AsyncSX1277(AsyncSX1276):
    pass


class AsyncSX1278(AsyncSX1276):
    pass


class AsyncSX1279(AsyncSX1276):
    pass
