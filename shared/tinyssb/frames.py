"""Link framing for LoRa and UDP multicast: `packet || CRC32`, the CRC big-endian.

Deployed ESP32 nodes send this on air with the radio's own CRC switched off, and on
UDP 239.5.5.8:1558. They drop frames of 11 bytes or less (a 7-byte DMX, at least one
payload byte and the CRC) and read at most 127 bytes.
"""
from tinyssb.errors import WireError
from tinyssb.hotloops import crc32

MIN_FRAME = 12   # deployed receivers drop frames <= 11 bytes
MAX_FRAME = 127  # deployed receivers read at most 127 bytes (LoRa FIFO minus one)


def add_crc(pkt):
    """Return `pkt || CRC32(pkt)` (big-endian)."""
    if len(pkt) + 4 > MAX_FRAME:
        raise WireError("frame_too_long", len(pkt))
    return bytes(pkt) + crc32(pkt).to_bytes(4, "big")


def strip_crc(frame):
    """Check and remove the CRC of a received frame.

    Raises:
        WireError: frame_too_short, frame_too_long or bad_crc.
    """
    n = len(frame)
    if n < MIN_FRAME:
        raise WireError("frame_too_short", n)
    if n > MAX_FRAME:
        raise WireError("frame_too_long", n)
    pkt = bytes(frame[:n - 4])
    if crc32(pkt) != int.from_bytes(frame[n - 4:], "big"):
        raise WireError("bad_crc")
    return pkt
