"""Secret handshake: messages checked against an independent computation from the
Scuttlebutt Protocol Guide formulas (raw hashlib / libsodium calls), both roles against
each other, and every failure mode (wrong network key, wrong server, replay, truncation,
tampering, weak keys), plus fuzzing of each parser."""
import hashlib

import nacl.bindings as sodium
import pytest
from hypothesis import given, settings, strategies as st

from tssb.context import SSB_MAIN_NETWORK_KEY
from tssb.session.errors import ProtocolError
from tssb.session.shs import ClientHandshake, Ephemeral, ServerHandshake

N = SSB_MAIN_NETWORK_KEY
SEED_A = bytes(range(32))                 # client long-term seed
SEED_B = bytes(range(100, 132))           # server long-term seed
EPH_A = bytes([7]) * 32                   # client ephemeral secret
EPH_B = bytes([9]) * 32                   # server ephemeral secret


def hmac_sha512_256(key, msg):
    # HMAC written out (RFC 2104, SHA-512 block 128 bytes), independent of the hmac module
    k = key.ljust(128, b"\0")
    inner = hashlib.sha512(bytes(x ^ 0x36 for x in k) + msg).digest()
    return hashlib.sha512(bytes(x ^ 0x5C for x in k) + inner).digest()[:32]


def h(*parts):
    return hashlib.sha256(b"".join(parts)).digest()


def expected_transcript():
    """All four messages and both box keys/nonces, computed straight from the guide."""
    A, a_sk = sodium.crypto_sign_seed_keypair(SEED_A)
    B, b_sk = sodium.crypto_sign_seed_keypair(SEED_B)
    ea_pub = sodium.crypto_scalarmult_base(EPH_A)
    eb_pub = sodium.crypto_scalarmult_base(EPH_B)
    m1 = hmac_sha512_256(N, ea_pub) + ea_pub
    m2 = hmac_sha512_256(N, eb_pub) + eb_pub
    ab = sodium.crypto_scalarmult(EPH_A, eb_pub)
    aB = sodium.crypto_scalarmult(EPH_A, sodium.crypto_sign_ed25519_pk_to_curve25519(B))
    Ab = sodium.crypto_scalarmult(EPH_B, sodium.crypto_sign_ed25519_pk_to_curve25519(A))
    sig_a = sodium.crypto_sign(N + B + h(ab), a_sk)[:64]
    m3 = sodium.crypto_secretbox(sig_a + A, bytes(24), h(N, ab, aB))
    sig_b = sodium.crypto_sign(N + sig_a + A + h(ab), b_sk)[:64]
    m4 = sodium.crypto_secretbox(sig_b, bytes(24), h(N, ab, aB, Ab))
    secret = h(h(N, ab, aB, Ab))
    keys = {"c2s_key": h(secret, B), "c2s_nonce": hmac_sha512_256(N, eb_pub)[:24],
            "s2c_key": h(secret, A), "s2c_nonce": hmac_sha512_256(N, ea_pub)[:24]}
    return A, B, (m1, m2, m3, m4), keys


def run(client, server, allow=True):
    m1 = client.hello()
    m2 = server.on_client_hello(m1)
    m3 = client.on_server_hello(m2)
    server.on_client_auth(m3)
    m4 = server.accept()
    return (m1, m2, m3, m4), client.on_server_accept(m4), server.keys()


def pair(net_client=N, net_server=N, server_key=None, eph=True):
    B = sodium.crypto_sign_seed_keypair(SEED_B)[0]
    c = ClientHandshake(net_client, SEED_A, server_key or B,
                        Ephemeral(EPH_A) if eph else None)
    s = ServerHandshake(net_server, SEED_B, Ephemeral(EPH_B) if eph else None)
    return c, s


def test_messages_match_the_protocol_guide_formulas():
    A, B, want, keys = expected_transcript()
    c, s = pair()
    msgs, ck, sk = run(c, s)
    assert [len(m) for m in msgs] == [64, 64, 112, 80]
    assert msgs == want
    assert (ck.send_key, ck.send_nonce, ck.recv_key, ck.recv_nonce) == \
        (keys["c2s_key"], keys["c2s_nonce"], keys["s2c_key"], keys["s2c_nonce"])
    assert (sk.recv_key, sk.recv_nonce, sk.send_key, sk.send_nonce) == \
        (keys["c2s_key"], keys["c2s_nonce"], keys["s2c_key"], keys["s2c_nonce"])
    assert ck.peer == B and sk.peer == A


def test_random_ephemerals_agree_and_differ_per_run():
    runs = []
    for _ in range(2):
        c, s = pair(eph=False)
        msgs, ck, sk = run(c, s)
        assert ck.send_key == sk.recv_key and ck.recv_key == sk.send_key
        assert ck.send_nonce == sk.recv_nonce and ck.recv_nonce == sk.send_nonce
        runs.append(ck.send_key)
    assert runs[0] != runs[1]          # forward secrecy: fresh keys per session


def test_wrong_network_key_fails_at_the_first_message():
    c, s = pair(net_server=bytes(32))
    with pytest.raises(ProtocolError) as e:
        s.on_client_hello(c.hello())
    assert e.value.reason == "hello hmac"
    # and a client with the right key rejects a server hello made with another key
    c2, s2 = pair(net_client=bytes(32))
    s_ok = ServerHandshake(bytes(32), SEED_B)
    m2 = s_ok.on_client_hello(c2.hello())
    c3, _ = pair()
    c3.hello()
    with pytest.raises(ProtocolError) as e:
        c3.on_server_hello(m2)
    assert e.value.reason == "hello hmac"


def test_client_expecting_another_server_is_rejected_by_the_server():
    other = sodium.crypto_sign_seed_keypair(bytes(32))[0]
    c, s = pair(server_key=other)
    m3 = c.on_server_hello(s.on_client_hello(c.hello()))
    with pytest.raises(ProtocolError) as e:
        s.on_client_auth(m3)
    assert e.value.reason == "auth decrypt"


def test_replayed_client_messages_fail_against_a_fresh_server():
    c, s = pair(eph=False)
    msgs, _, _ = run(c, s)
    s2 = ServerHandshake(N, SEED_B)            # new ephemeral key
    s2.on_client_hello(msgs[0])                # hello itself is just a public key
    with pytest.raises(ProtocolError) as e:
        s2.on_client_auth(msgs[2])
    assert e.value.reason == "auth decrypt"


def test_replayed_server_messages_fail_against_a_fresh_client():
    c, s = pair(eph=False)
    msgs, _, _ = run(c, s)
    c2, _ = pair(eph=False)
    c2.hello()
    c2.on_server_hello(msgs[1])
    with pytest.raises(ProtocolError) as e:
        c2.on_server_accept(msgs[3])
    assert e.value.reason == "accept decrypt"


@pytest.mark.parametrize("step", [0, 1, 2, 3])
def test_truncated_message_fails_with_a_length_reason(step):
    c, s = pair()
    m1 = c.hello()
    msgs = [m1]
    if step == 0:
        with pytest.raises(ProtocolError, match="hello length"):
            s.on_client_hello(m1[:-1])
        return
    m2 = s.on_client_hello(m1)
    if step == 1:
        with pytest.raises(ProtocolError, match="hello length"):
            c.on_server_hello(m2[:-1])
        return
    m3 = c.on_server_hello(m2)
    if step == 2:
        with pytest.raises(ProtocolError, match="auth length"):
            s.on_client_auth(m3[:-1])
        return
    s.on_client_auth(m3)
    m4 = s.accept()
    with pytest.raises(ProtocolError, match="accept length"):
        c.on_server_accept(m4[:-1])
    assert msgs


def test_every_flipped_bit_position_of_auth_and_accept_is_detected():
    _, _, (m1, m2, m3, m4), _ = expected_transcript()
    for i in range(len(m3)):
        c, s = pair()
        s.on_client_hello(m1)
        bad = bytearray(m3)
        bad[i] ^= 0x01
        with pytest.raises(ProtocolError):
            s.on_client_auth(bytes(bad))
    for i in range(len(m4)):
        c, s = pair()
        c.hello()
        c.on_server_hello(m2)
        bad = bytearray(m4)
        bad[i] ^= 0x80
        with pytest.raises(ProtocolError):
            c.on_server_accept(bytes(bad))


def test_low_order_ephemeral_key_is_refused():
    zero = bytes(32)                          # the identity point: shared secret all zero
    hello = hmac_sha512_256(N, zero) + zero
    _, s = pair()
    with pytest.raises(ProtocolError) as e:
        s.on_client_hello(hello)
    assert e.value.reason == "weak key"


def test_calls_out_of_order_are_protocol_errors_and_failure_is_final():
    c, s = pair()
    with pytest.raises(ProtocolError, match="out of order"):
        s.on_client_auth(bytes(112))
    with pytest.raises(ProtocolError):
        s.on_client_hello(bytes(64))           # bad hmac: server now failed
    with pytest.raises(ProtocolError, match="out of order"):
        s.on_client_hello(c.hello())


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.binary(max_size=200), st.binary(max_size=200))
def test_fuzz_server_parsers(m1, m3, m4):
    c, s = pair()
    good_m1 = c.hello()
    for first in (m1, good_m1):
        c, s = pair()
        c.hello()
        try:
            m2 = s.on_client_hello(first)
        except ProtocolError:
            continue
        try:
            s.on_client_auth(m3)
        except ProtocolError:
            pass
        c.on_server_hello(m2)
        try:
            c.on_server_accept(m4)
        except ProtocolError:
            pass


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=64, max_size=64))
def test_fuzz_client_hello_parser(m2):
    c, _ = pair()
    c.hello()
    with pytest.raises(ProtocolError):
        c.on_server_hello(m2)   # a random 64-byte hello never carries a valid HMAC
