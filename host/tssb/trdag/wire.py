"""Frames of the trDAG sync protocol (one frame per channel message).

    HELLO  01 | version | flags | mode | levels | cutoff | hash_len | ROOT(20) | NONCE(16)
              | varint depth | varint total
    PART   02 | bytes            a piece of a round body; more follow
    ROUND  03 | bytes            last piece of a round body
    DATA   04 | element          one DAG message (message.py)
    FINAL  05 | varint count | XOR(hash_len)     aggregate of the DAG both should now hold
    ABORT  06 | reason (UTF-8)

flags: bit 0 = sender holds the root message. A round body can exceed what one channel
message carries (session MAX_MESSAGE 512 KiB), so it is cut into PART frames of at most
PART_SIZE bytes; the receiver joins them up to MAX_ROUND_BYTES.
"""
from tssb.trdag.errors import TrdagError

HELLO, PART, ROUND, DATA, FINAL, ABORT = 1, 2, 3, 4, 5, 6
VERSION = 1
NONCE_LEN = 16            # 128 bits per side: the salt is unpredictable to either alone
ROOT_LEN = 20
PART_SIZE = 60 * 1024     # well under the session layer's 512 KiB channel message
MAX_ROUND_BYTES = 32 * 1024 * 1024   # 2M hashed IDs of 16 bytes: the largest naive round
MAX_REASON = 200
MAX_VARINT_BYTES = 5      # values < 2^35; every count is checked against a tighter bound


def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class Reader:
    """Bounded reader over one frame body; every overrun is a TrdagError."""

    def __init__(self, buf, pos=0):
        self.buf = buf
        self.pos = pos

    def take(self, n):
        if n < 0 or self.pos + n > len(self.buf):
            raise TrdagError("truncated_frame")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return bytes(b)

    def byte(self):
        return self.take(1)[0]

    def varint(self, limit):
        """Read a varint and check it is <= limit."""
        val = shift = 0
        for _ in range(MAX_VARINT_BYTES):
            b = self.byte()
            val |= (b & 0x7F) << shift
            if not b & 0x80:
                if val > limit:
                    raise TrdagError("value_out_of_range", "%d > %d" % (val, limit))
                return val
            shift += 7
        raise TrdagError("bad_varint")

    def left(self):
        return len(self.buf) - self.pos

    def end(self):
        if self.pos != len(self.buf):
            raise TrdagError("trailing_bytes", self.left())


def hello(has_root, mode, levels, cutoff, hash_len, root, nonce, depth, total):
    return (bytes((HELLO, VERSION, 1 if has_root else 0, mode, levels)) + varint(cutoff)
            + bytes((hash_len,)) + root + nonce + varint(depth) + varint(total))


def parse_hello(frame, max_count):
    """Returns a dict of the HELLO fields. Raises TrdagError."""
    r = Reader(frame, 1)
    if r.byte() != VERSION:
        raise TrdagError("bad_version")
    flags = r.byte()
    h = {"has_root": bool(flags & 1), "mode": r.byte(), "levels": r.byte(),
         "cutoff": r.varint(max_count), "hash_len": r.byte(), "root": r.take(ROOT_LEN),
         "nonce": r.take(NONCE_LEN), "depth": r.varint(max_count), "total": r.varint(max_count)}
    r.end()
    return h


def round_frames(body):
    """Cut a round body into PART* ROUND frames."""
    out = []
    for i in range(0, max(len(body) - PART_SIZE, 0), PART_SIZE):
        out.append(bytes((PART,)) + body[i:i + PART_SIZE])
    tail = (len(body) - 1) // PART_SIZE * PART_SIZE if body else 0
    out.append(bytes((ROUND,)) + body[tail:])
    return out


def final(count, xor):
    return bytes((FINAL,)) + varint(count) + bytes(xor)


def abort(reason):
    return bytes((ABORT,)) + reason.encode("utf-8")[:MAX_REASON]
