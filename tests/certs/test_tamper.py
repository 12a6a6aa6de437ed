"""Tampering with the message, any hash, any signature or the order is detected."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FAST
from tssb.certs import CertError, verify
from tssb.certs import certificate as cm

# (seq, anchor) pairs with long paths, many roots and several records
CASES = [(1, 1), (6, 7), (7, 7), (5, 8), (300, 300), (511, 511), (1, 1023), (700, 1023),
         (1000, 1024), (1023, 1023), (3, 1000)]


def fields(cert):
    """(offset, length) of every field of an encoded certificate after the header."""
    d, r, m = cm.layout(cert.seq, cert.anchor)
    p = cm.HEADER_LEN
    out = [(p - 140, 20), (p - 120, 120)]          # prev, pkt
    for _ in range(d + r - 1):
        out.append((p, 20))
        p += 20
    for _ in range(m):
        out.append((p, 20))
        out.append((p + 20, 64))
        p += cm.REC_LEN
    return out


def flipped(raw, pos):
    b = bytearray(raw)
    b[pos] ^= 0x01
    return bytes(b)


@pytest.mark.parametrize("seq,anchor", CASES)
def test_every_byte_of_every_field_is_covered(feed1024, seq, anchor):
    raw = feed1024.cert(seq, anchor)
    verify(raw, FAST)
    cert = cm.Certificate.decode(raw)
    for off, length in fields(cert):
        for pos in range(off, off + length):
            with pytest.raises(CertError):
                verify(flipped(raw, pos), FAST)


@pytest.mark.parametrize("seq,anchor", CASES)
def test_header_fields(feed1024, seq, anchor):
    raw = feed1024.cert(seq, anchor)
    for pos in range(0, 8 + 1 + 32 + 8):  # magic, version, fid, seq, anchor
        with pytest.raises(CertError):
            verify(flipped(raw, pos), FAST)
    with pytest.raises(CertError) as e:
        verify(raw[:-1], FAST)
    assert e.value.reason == "bad_length"
    with pytest.raises(CertError):
        verify(raw + b"\0", FAST)


@pytest.mark.parametrize("seq,anchor", CASES)
def test_order_of_hashes_and_records(feed1024, seq, anchor):
    cert = cm.Certificate.decode(feed1024.cert(seq, anchor))
    for name in ("siblings", "roots", "records"):
        items = getattr(cert, name)
        for i in range(len(items)):
            for j in range(i + 1, len(items)):
                if items[i] == items[j]:
                    continue
                swapped = list(items)
                swapped[i], swapped[j] = swapped[j], swapped[i]
                c = cm.Certificate.decode(cert.encode())
                setattr(c, name, swapped)
                with pytest.raises(CertError):
                    verify(c.encode(), FAST)


def test_another_message_or_position(feed1024):
    """A genuine entry presented as another one, or at another position, fails."""
    raw = feed1024.cert(10, 16)
    cert = cm.Certificate.decode(raw)
    cert.pkt = feed1024.store.entry(feed1024.fid, 11)
    with pytest.raises(CertError):
        verify(cert.encode(), FAST)
    other = cm.Certificate.decode(feed1024.cert(11, 16))
    other.seq = 10  # right entry bytes, wrong position: NAM (and so DMX and MID) differ
    with pytest.raises(CertError):
        verify(other.encode(), FAST)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600))
def test_random_bytes_only_raise_cert_error(data):
    for blob in (data, cm.MAGIC + bytes((cm.VERSION,)) + data):
        with pytest.raises(CertError):
            verify(blob, FAST)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.integers(0, 2 ** 32 - 1))
def test_any_header_range_is_rejected_cleanly(seq, anchor):
    blob = cm.MAGIC + bytes((cm.VERSION,)) + bytes(32) + seq.to_bytes(4, "big") + \
        anchor.to_bytes(4, "big") + bytes(140 + 40)
    with pytest.raises(CertError):
        verify(blob, FAST)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_random_fork_proofs_only_raise_cert_error(data):
    from tssb.certs import verify_proof
    from tssb.certs.forks import MAGIC, VERSION
    for blob in (data, MAGIC + bytes((VERSION,)) + data):
        with pytest.raises(CertError):
            verify_proof(blob, FAST)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([b"C", b"R", b"F", b"X", b""]), st.binary(max_size=60))
def test_service_answers_any_request(op, body):
    import types
    from tinyssb.store import MemStore
    from tssb.certs import MemRecords
    from tssb.certs.service import Service
    ctx = types.SimpleNamespace(store=MemStore(), identity=None)
    rep = Service(ctx, records=MemRecords(), scheme=FAST).handle(op + body)
    assert len(rep) >= 2 and rep[1] in (0, 1)


def test_dropped_or_added_parts_are_rejected_even_as_objects(feed1024):
    cert = cm.Certificate.decode(feed1024.cert(700, 1023))
    for name in ("siblings", "roots", "records"):
        for change in (lambda x: x[:-1], lambda x: x + x[:1], lambda x: []):
            c = cm.Certificate.decode(cert.encode())
            setattr(c, name, change(getattr(c, name)))
            with pytest.raises(CertError):
                verify(c, FAST)
