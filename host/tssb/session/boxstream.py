"""Box stream framing, sans-IO, as in the Scuttlebutt Protocol Guide ("Box stream").

Each message is a 34-byte encrypted header followed by the encrypted body:

  header = secretbox_{key, n}(body_len:u16 BE || body_mac:16)      (16 + 18 = 34 bytes)
  body   = secretbox_{key, n+1}(body) without its 16-byte MAC (it travels in the header)

and the nonce n advances by 2 per message (24-byte big-endian counter, wrapping).
Bodies are 1..4096 bytes. The goodbye message is a header of 18 zero bytes; after it
the stream carries nothing more.
"""
import nacl.bindings as sodium
import nacl.exceptions

from tssb.session.errors import ProtocolError

HEADER_LEN = 34        # 16-byte MAC + 2-byte length + 16-byte body MAC
MAC_LEN = 16
MAX_BODY = 4096        # Protocol Guide: "body ... at most 4096 bytes"
NONCE_LEN = 24
_NONCE_MOD = 1 << (8 * NONCE_LEN)
GOODBYE_PLAIN = bytes(18)


def _nonce(n):
    return n.to_bytes(NONCE_LEN, "big")


class BoxWriter:
    """Encrypts outgoing bodies. Args: key (32 bytes), nonce (24-byte starting nonce)."""

    def __init__(self, key, nonce):
        self._key = bytes(key)
        self._n = int.from_bytes(bytes(nonce), "big")
        self.closed = False

    def _advance(self):
        n = self._n
        self._n = (n + 2) % _NONCE_MOD
        return _nonce(n), _nonce((n + 1) % _NONCE_MOD)

    def seal(self, body):
        """Returns: the wire bytes of one message (header + body).

        Raises:
            ValueError: body empty, longer than MAX_BODY, or writer closed (caller bugs).
        """
        if self.closed:
            raise ValueError("box stream closed")
        if not 0 < len(body) <= MAX_BODY:
            raise ValueError("body must be 1..%d bytes" % MAX_BODY)
        hn, bn = self._advance()
        boxed = sodium.crypto_secretbox(bytes(body), bn, self._key)
        head = len(body).to_bytes(2, "big") + boxed[:MAC_LEN]
        return sodium.crypto_secretbox(head, hn, self._key) + boxed[MAC_LEN:]

    def goodbye(self):
        """Returns: the goodbye message; the writer is closed afterwards."""
        hn, _ = self._advance()
        self.closed = True
        return sodium.crypto_secretbox(GOODBYE_PLAIN, hn, self._key)


class BoxReader:
    """Decrypts incoming bytes into bodies.

    feed(data) returns the complete bodies found; partial input is kept (never more than
    one header + one body beyond what a single feed() brings). After the goodbye,
    `closed` is True. Any tampering, a bad length, or data after goodbye raises
    ProtocolError, and the reader stays failed.
    """

    def __init__(self, key, nonce):
        self._key = bytes(key)
        self._n = int.from_bytes(bytes(nonce), "big")
        self._buf = bytearray()
        self._need = None   # (body_len, body_mac) once a header is decoded
        self.closed = False
        self.failed = None

    def _fail(self, reason, detail=None):
        self.failed = ProtocolError(reason, detail)
        raise self.failed

    def feed(self, data):
        """Args: data (bytes received). Returns: list of bodies. Raises: ProtocolError."""
        if self.failed is not None:
            raise self.failed
        if data and self.closed:
            self._fail("data after goodbye")
        self._buf += data
        out = []
        while True:
            if self._need is None:
                if len(self._buf) < HEADER_LEN:
                    break
                try:
                    head = sodium.crypto_secretbox_open(bytes(self._buf[:HEADER_LEN]),
                                                        _nonce(self._n), self._key)
                except (nacl.exceptions.CryptoError, ValueError):
                    self._fail("header tampered")
                del self._buf[:HEADER_LEN]
                if head == GOODBYE_PLAIN:
                    self.closed = True
                    if self._buf:
                        self._fail("data after goodbye")
                    break
                length = int.from_bytes(head[:2], "big")
                if not 0 < length <= MAX_BODY:
                    self._fail("body length", length)
                self._need = (length, head[2:])
            length, mac = self._need
            if len(self._buf) < length:
                break
            bn = _nonce((self._n + 1) % _NONCE_MOD)
            try:
                body = sodium.crypto_secretbox_open(mac + bytes(self._buf[:length]), bn, self._key)
            except (nacl.exceptions.CryptoError, ValueError):
                self._fail("body tampered")
            del self._buf[:length]
            self._need = None
            self._n = (self._n + 2) % _NONCE_MOD
            out.append(body)
        return out

    def pending(self):
        """Returns: bytes held awaiting the rest of a message (for bounds checks)."""
        return len(self._buf)
