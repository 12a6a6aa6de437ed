"""Secret handshake (SHS), sans-IO, as in the Scuttlebutt Protocol Guide ("Handshake").

Notation (client A, server B; N = network key; a, b = ephemeral Curve25519 keys):

  1. client hello   (64)  hmac_N(a_pub) || a_pub
  2. server hello   (64)  hmac_N(b_pub) || b_pub
  3. client auth   (112)  secretbox_{sha256(N|ab|aB)}(sig_A(N | B | sha256(ab)) || A)
  4. server accept  (80)  secretbox_{sha256(N|ab|aB|Ab)}(sig_B(N | sig_A | A | sha256(ab)))

with ab = a*b, aB = a*curve(B), Ab = curve(A)*b (X25519), hmac = HMAC-SHA-512 cut to
32 bytes (libsodium crypto_auth), secretboxes with the all-zero nonce (each key is used
once). Afterwards both derive the box-stream keys from S = sha256(sha256(N|ab|aB|Ab)):
client->server key sha256(S | B), nonce hmac_N(b_pub)[:24]; server->client key
sha256(S | A), nonce hmac_N(a_pub)[:24].

The objects take and return bytes only; the asyncio driver is in `net`. Every check
failure raises ProtocolError with a reason, and the driver closes without answering.
"""
import hashlib
import hmac

import nacl.bindings as sodium
import nacl.exceptions

from tssb.session.errors import ProtocolError

HELLO_LEN = 64
CLIENT_AUTH_LEN = 112   # 16 MAC + 64 signature + 32 public key
SERVER_ACCEPT_LEN = 80  # 16 MAC + 64 signature
KEY_LEN = 32
ZERO_NONCE = bytes(24)


def auth(key, msg):
    """HMAC-SHA-512-256 (libsodium crypto_auth): HMAC-SHA-512 truncated to 32 bytes."""
    return hmac.new(key, msg, hashlib.sha512).digest()[:32]


def _sha256(*parts):
    return hashlib.sha256(b"".join(parts)).digest()


def _x25519(sk, pk):
    try:
        return sodium.crypto_scalarmult(sk, pk)
    except (nacl.exceptions.CryptoError, nacl.exceptions.RuntimeError, ValueError, TypeError):
        # libsodium refuses low-order points (all-zero shared secret)
        raise ProtocolError("weak key")


def _ed_to_curve_pk(pk):
    try:
        return sodium.crypto_sign_ed25519_pk_to_curve25519(pk)
    except (nacl.exceptions.CryptoError, nacl.exceptions.RuntimeError, ValueError, TypeError):
        raise ProtocolError("bad long-term key")


def _open_box(box, key, reason):
    try:
        return sodium.crypto_secretbox_open(box, ZERO_NONCE, key)
    except (nacl.exceptions.CryptoError, ValueError, TypeError):
        raise ProtocolError(reason)


def _verify(pub, msg, sig, reason):
    try:
        sodium.crypto_sign_open(sig + msg, pub)
    except (nacl.exceptions.CryptoError, nacl.exceptions.BadSignatureError, ValueError, TypeError):
        raise ProtocolError(reason)


def _sign(sk64, msg):
    return sodium.crypto_sign(msg, sk64)[:64]


class Ephemeral:
    """An ephemeral Curve25519 key pair (pass `secret` for reproducible test vectors)."""

    def __init__(self, secret=None):
        if secret is None:
            self.public, self.secret = sodium.crypto_box_keypair()
        else:
            if len(secret) != 32:
                raise ValueError("ephemeral secret must be 32 bytes")
            self.secret = bytes(secret)
            self.public = sodium.crypto_scalarmult_base(self.secret)


class BoxKeys:
    """Result of a handshake: keys and starting nonces for both directions, and the peer."""

    def __init__(self, send_key, send_nonce, recv_key, recv_nonce, peer):
        self.send_key = send_key
        self.send_nonce = send_nonce
        self.recv_key = recv_key
        self.recv_nonce = recv_nonce
        self.peer = peer


def _check_hello(network_key, msg):
    if len(msg) != HELLO_LEN:
        raise ProtocolError("hello length", len(msg))
    mac, eph = bytes(msg[:32]), bytes(msg[32:])
    if not hmac.compare_digest(mac, auth(network_key, eph)):
        raise ProtocolError("hello hmac")  # a different network key, or garbage
    return eph


def _keypair(seed):
    if len(seed) != KEY_LEN:
        raise ValueError("seed must be 32 bytes")
    return sodium.crypto_sign_seed_keypair(bytes(seed))  # (public, 64-byte secret)


class _Base:
    def __init__(self, network_key, seed, ephemeral=None):
        if len(network_key) != KEY_LEN:
            raise ValueError("network key must be 32 bytes")
        self.network_key = bytes(network_key)
        self.public, self._sk = _keypair(seed)
        self._curve_sk = sodium.crypto_sign_ed25519_sk_to_curve25519(self._sk)
        self.eph = ephemeral or Ephemeral()
        self.state = "start"

    def _expect(self, state):
        if self.state != state:
            raise ProtocolError("out of order", "%s, expected %s" % (self.state, state))

    def _fail(self, exc):
        self.state = "failed"
        raise exc


class ClientHandshake(_Base):
    """Client (initiator) side. Knows the server's long-term public key in advance.

    Use: hello() -> send; on_server_hello(msg) -> send; on_server_accept(msg) -> BoxKeys.
    """

    def __init__(self, network_key, seed, server_public, ephemeral=None):
        _Base.__init__(self, network_key, seed, ephemeral)
        if len(server_public) != KEY_LEN:
            raise ValueError("server key must be 32 bytes")
        self.server_public = bytes(server_public)

    def hello(self):
        """Returns: message 1 (64 bytes)."""
        self._expect("start")
        self.state = "hello"
        return auth(self.network_key, self.eph.public) + self.eph.public

    def on_server_hello(self, msg):
        """Check message 2. Returns: message 3 (112 bytes). Raises: ProtocolError."""
        self._expect("hello")
        try:
            self.server_eph = _check_hello(self.network_key, msg)
            self.ab = _x25519(self.eph.secret, self.server_eph)
            self.aB = _x25519(self.eph.secret, _ed_to_curve_pk(self.server_public))
        except ProtocolError as e:
            self._fail(e)
        self.sig_a = _sign(self._sk, self.network_key + self.server_public + _sha256(self.ab))
        key = _sha256(self.network_key, self.ab, self.aB)
        self.state = "auth"
        return sodium.crypto_secretbox(self.sig_a + self.public, ZERO_NONCE, key)

    def on_server_accept(self, msg):
        """Check message 4. Returns: BoxKeys. Raises: ProtocolError."""
        self._expect("auth")
        try:
            if len(msg) != SERVER_ACCEPT_LEN:
                raise ProtocolError("accept length", len(msg))
            Ab = _x25519(self._curve_sk, self.server_eph)
            key = _sha256(self.network_key, self.ab, self.aB, Ab)
            sig_b = _open_box(bytes(msg), key, "accept decrypt")
            _verify(self.server_public,
                    self.network_key + self.sig_a + self.public + _sha256(self.ab),
                    sig_b, "accept signature")
        except ProtocolError as e:
            self._fail(e)
        self.state = "done"
        secret = _sha256(_sha256(self.network_key, self.ab, self.aB, Ab))
        return BoxKeys(_sha256(secret, self.server_public),
                       auth(self.network_key, self.server_eph)[:24],
                       _sha256(secret, self.public),
                       auth(self.network_key, self.eph.public)[:24],
                       self.server_public)


class ServerHandshake(_Base):
    """Server (responder) side. Learns the client's identity from message 3.

    Use: on_client_hello(msg) -> send; on_client_auth(msg) -> client key (decide whether
    to allow it); accept() -> send message 4; keys() -> BoxKeys.
    """

    def on_client_hello(self, msg):
        """Check message 1. Returns: message 2 (64 bytes). Raises: ProtocolError."""
        self._expect("start")
        try:
            self.client_eph = _check_hello(self.network_key, msg)
            self.ab = _x25519(self.eph.secret, self.client_eph)
            self.aB = _x25519(self._curve_sk, self.client_eph)
        except ProtocolError as e:
            self._fail(e)
        self.state = "hello"
        return auth(self.network_key, self.eph.public) + self.eph.public

    def on_client_auth(self, msg):
        """Check message 3. Returns: the client's long-term public key. Raises: ProtocolError."""
        self._expect("hello")
        try:
            if len(msg) != CLIENT_AUTH_LEN:
                raise ProtocolError("auth length", len(msg))
            plain = _open_box(bytes(msg), _sha256(self.network_key, self.ab, self.aB), "auth decrypt")
            self.sig_a, client = plain[:64], plain[64:]
            _verify(client, self.network_key + self.public + _sha256(self.ab), self.sig_a,
                    "auth signature")
            self.Ab = _x25519(self.eph.secret, _ed_to_curve_pk(client))
        except ProtocolError as e:
            self._fail(e)
        self.client_public = client
        self.state = "authed"
        return client

    def accept(self):
        """Returns: message 4 (80 bytes), confirming the server's identity to the client."""
        self._expect("authed")
        sig_b = _sign(self._sk, self.network_key + self.sig_a + self.client_public + _sha256(self.ab))
        key = _sha256(self.network_key, self.ab, self.aB, self.Ab)
        self.state = "done"
        return sodium.crypto_secretbox(sig_b, ZERO_NONCE, key)

    def keys(self):
        """Returns: BoxKeys for the server side (after accept())."""
        self._expect("done")
        secret = _sha256(_sha256(self.network_key, self.ab, self.aB, self.Ab))
        return BoxKeys(_sha256(secret, self.client_public),
                       auth(self.network_key, self.client_eph)[:24],
                       _sha256(secret, self.public),
                       auth(self.network_key, self.eph.public)[:24],
                       self.client_public)
