"""Byte-level helpers shared by the clock codecs: unsigned LEB128 varints and a bounded
reader that raises ClockError instead of IndexError on short or oversized input."""
from tinyssb.bipf import varint_encode
from tssb.clock.errors import ClockError

# A varint longer than this cannot be a 64-bit value (ceil(64 / 7) = 10 bytes).
MAX_VARINT_BYTES = 10


# Encoding is the core's (tinyssb.bipf); decoding lives in Reader.uint, which raises the
# clock's own error type with the field name.
varint = varint_encode


class Reader:
    """Cursor over a received message; every read checks the remaining length."""

    def __init__(self, data):
        self.data = memoryview(bytes(data))
        self.pos = 0

    def remaining(self):
        return len(self.data) - self.pos

    def take(self, n, what="field"):
        if n < 0 or self.pos + n > len(self.data):
            raise ClockError("short", what)
        b = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return b

    def byte(self, what="byte"):
        return self.take(1, what)[0]

    def uint(self, what="varint", limit=(1 << 64) - 1):
        n = 0
        shift = 0
        for _ in range(MAX_VARINT_BYTES):
            b = self.byte(what)
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                if n > limit:
                    raise ClockError("range", what)
                return n
            shift += 7
        raise ClockError("varint", what)

    def blob(self, what="blob", limit=1 << 16):
        n = self.uint(what, limit)
        return self.take(n, what)

    def end(self):
        if self.pos != len(self.data):
            raise ClockError("trailing", self.remaining())
