"""`lora` on the virtual board: micropython-lib's async modem classes (lora-sx126x /
lora-sx127x with lora-async) with the air replaced by UDP multicast.

A frame sent is one datagram, the on-air frame as it is (`packet || CRC32`, the format
`tssb bridge --udp` and deployed UDP peers use), sent when its airtime has passed, as a
receiver gets a LoRa frame at its end. Every modem joined to the same group and port
hears it, with RSSI and SNR fixed at RSSI_DBM / SNR_Q. Two things of a real radio are
kept: it is half duplex (what arrives while it sends is lost) and `recv()` listens once
(what arrives while nobody waits in recv() is lost, as with `start_recv(continuous=
False)`); `recv_continuous()` keeps listening and, like the chip's single receive
buffer, keeps only the newest frame that arrived while the program was busy.

MEDIUM is (group, port, interface address) or None (a board alone on its channel); the
vboard sets it before the firmware builds its modem.
"""
import asyncio
import socket
import time

MEDIUM = None
RSSI_DBM = -70
SNR_Q = 38            # 9.5 dB in the drivers' quarter-dB unit
POLL_MS = 5           # how often a waiting receive looks at the socket
ECHOES = 16           # own recent frames, skipped when the group hands them back
SO_REUSEPORT = 15     # Linux values: the unix port's socket module lacks the names
IPPROTO_IP = 0
IP_MULTICAST_IF = 32
IP_MULTICAST_TTL = 33
IP_MULTICAST_LOOP = 34


class RxPacket(bytearray):
    def __init__(self, payload, ticks_ms, snr, rssi, valid_crc=True):
        super().__init__(payload)
        self.ticks_ms = ticks_ms
        self.snr = snr
        self.rssi = rssi
        self.valid_crc = valid_crc


def _aton(ip):
    return bytes([int(x) for x in ip.split(".")])


def _socket(group, port, iface):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, SO_REUSEPORT, 1)
    s.bind(socket.getaddrinfo("0.0.0.0", port)[0][-1])
    s.setsockopt(IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, _aton(group) + _aton(iface))
    s.setsockopt(IPPROTO_IP, IP_MULTICAST_IF, _aton(iface))
    s.setsockopt(IPPROTO_IP, IP_MULTICAST_LOOP, 1)
    s.setsockopt(IPPROTO_IP, IP_MULTICAST_TTL, 1)
    s.setblocking(False)
    return s, socket.getaddrinfo(group, port)[0][-1]


class AsyncModem:
    """One class for every chip: the constructors take the drivers' arguments."""

    def __init__(self, spi=None, cs=None, *args, lora_cfg=None, **kw):
        self.cfg = {}
        self.counters = {"sent": 0, "heard": 0, "missed": 0, "during_tx": 0}
        self._echo = []
        self._tx_until = 0
        self._sock = self._dest = None
        if MEDIUM is not None:
            self._sock, self._dest = _socket(MEDIUM[0], MEDIUM[1], MEDIUM[2])
        if lora_cfg:
            self.configure(lora_cfg)

    def configure(self, lora_cfg):
        self.cfg.update(lora_cfg)

    def get_time_on_air_us(self, payload_len):
        from tssbfw.airtime import time_on_air_us
        c = self.cfg
        bw_hz = int(float(c.get("bw", "125")) * 1000)
        return time_on_air_us(payload_len, c.get("sf", 7), bw_hz,
                              c.get("coding_rate", 5), c.get("preamble_len", 12),
                              c.get("crc_en", True), not c.get("implicit_header", False))

    def standby(self):
        pass

    def sleep(self):
        pass

    async def send(self, packet, tx_at_ms=None):
        packet = bytes(packet)
        air_ms = self.get_time_on_air_us(len(packet)) // 1000
        self._tx_until = time.ticks_add(time.ticks_ms(), air_ms)
        await asyncio.sleep_ms(air_ms)
        if self._sock is not None:
            self._echo.append(packet)
            if len(self._echo) > ECHOES:
                self._echo.pop(0)
            try:
                self._sock.sendto(packet, self._dest)
            except OSError:
                pass    # no route: the frame is lost on air, as frames are
        self.counters["sent"] += 1
        return time.ticks_ms()

    def _take(self):
        """The next datagram from another board, or None."""
        while self._sock is not None:
            try:
                data = self._sock.recv(256)
            except OSError:
                return None
            if data in self._echo:
                continue
            if time.ticks_diff(self._tx_until, time.ticks_ms()) > 0:
                self.counters["during_tx"] += 1
                continue
            return data
        return None

    def _stale(self, keep_newest):
        """Frames that arrived while nobody listened: lost, but for the newest one when
        the radio kept listening."""
        last = None
        while True:
            d = self._take()
            if d is None:
                break
            if last is not None:
                self.counters["missed"] += 1
            last = d
        if last is not None and not keep_newest:
            self.counters["missed"] += 1
            last = None
        return last

    def _packet(self, data):
        self.counters["heard"] += 1
        return RxPacket(data, time.ticks_ms(), SNR_Q, RSSI_DBM)

    async def _wait(self, first, timeout_ms):
        if first is not None:
            return self._packet(first)
        start = time.ticks_ms()
        while timeout_ms is None or time.ticks_diff(time.ticks_ms(), start) < timeout_ms:
            d = self._take()
            if d is not None:
                return self._packet(d)
            await asyncio.sleep_ms(POLL_MS)
        return None

    async def recv(self, timeout_ms=None, rx_length=0xFF, rx_packet=None):
        return await self._wait(self._stale(False), timeout_ms)

    def recv_continuous(self, rx_length=0xFF, rx_packet=None):
        return _Continuous(self)


class _Continuous:
    def __init__(self, modem):
        self.modem = modem

    def __aiter__(self):
        return self

    async def __anext__(self):
        return await self.modem._wait(self.modem._stale(True), None)


AsyncSX1261 = AsyncSX1262 = AsyncSX1276 = AsyncSX1277 = AsyncSX1278 = AsyncSX1279 = AsyncModem
