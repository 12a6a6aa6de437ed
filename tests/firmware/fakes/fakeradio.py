"""An in-memory radio medium for the fake `lora` drivers.

Every modem registers with an Ether; a sent frame reaches every other modem whose radio
settings match the sender's (frequency, SF, bandwidth, coding rate, sync word, preamble,
header mode and CRC setting), as real LoRa receivers only demodulate matching settings.
`corrupt(src, dst, data) -> data` may flip bits or truncate in flight; `loss(src, dst)`
may drop a delivery.
"""

MATCH_KEYS = ("freq_khz", "sf", "bw", "coding_rate", "syncword", "preamble_len",
              "implicit_header", "crc_en")


class Ether:
    def __init__(self):
        self.modems = []
        self.corrupt = None
        self.loss = None
        self.sent = 0
        self.delivered = 0

    def attach(self, modem):
        self.modems.append(modem)

    def transmit(self, src, data):
        self.sent += 1
        key = src.air_key()
        for m in self.modems:
            if m is src or m.air_key() != key:
                continue
            if self.loss is not None and self.loss(src, m):
                continue
            d = bytes(data)
            if self.corrupt is not None:
                d = self.corrupt(src, m, d)
            m.deliver(d)
            self.delivered += 1


ETHER = Ether()  # the default medium; tests may replace lora.ether before building modems
