"""Forked histories give contradictory certificates and a fork proof others can check."""
import pytest

from conftest import ED25519, FAST, Feed
from tssb.certs import CertError, compare, verify, verify_proof
from tssb.certs import certificate as cm
from tssb.certs.forks import (CONSISTENT, CONTRADICTION, UNLINKED, ForkProof, check_all)

LEN = 40


def anchors(feed, seq):
    out = {seq, feed.log.front()}
    if cm.next_pow2(seq) <= feed.log.front():
        out.add(cm.next_pow2(seq))
    return sorted(out)


def resolve(x, y, holders, scheme=FAST):
    """compare(x, y); when unlinked, fetch the link from the later certificate's holder."""
    c = compare(x, y)
    if c.status != UNLINKED:
        return c, None
    seq, anchor = c.link
    later = y if y.anchor >= x.anchor else x
    link = verify(holders[id(later)].cert(seq, anchor), scheme)
    return check_all([x, link, y]), link


@pytest.fixture(scope="module")
def histories():
    out = {}
    for f in (1, 2, 5, 8, 13):
        h = Feed(b"\x05" * 32).grow(LEN)
        g = h.fork(f).grow(LEN - f + 1 + 3, tag=b"other")
        out[f] = (h, g)
    return out


def test_forks_are_always_detected(histories):
    for f, (h, g) in histories.items():
        for s in range(f, LEN + 1):
            for t in range(f, LEN + 1, 3):
                for a in anchors(h, s):
                    for b in anchors(g, t):
                        x, y = verify(h.cert(s, a), FAST), verify(g.cert(t, b), FAST)
                        c, _ = resolve(x, y, {id(x): h, id(y): g})
                        assert c.status == CONTRADICTION, (f, s, a, t, b)
                        report = verify_proof(ForkProof.decode(c.proof.encode()), FAST)
                        assert report.fid == h.fid and report.value_a != report.value_b


def test_same_history_is_never_contradictory(histories):
    h, _ = histories[1]
    vs = []
    for s in range(1, LEN + 1):
        for a in anchors(h, s):
            vs.append(verify(h.cert(s, a), FAST))
    unlinked = 0
    for x in vs[::3]:
        for y in vs[1::4]:
            c, link = resolve(x, y, {id(x): h, id(y): h})
            assert c.status == CONSISTENT
            unlinked += link is not None
    assert unlinked > 0  # the link step was exercised


def test_shared_prefix_is_consistent_across_the_fork(histories):
    h, g = histories[13]
    for s in range(1, 13):
        for a in range(s, 13):
            x, y = verify(h.cert(s, a), FAST), verify(g.cert(s, a), FAST)
            assert x.raw == y.raw and compare(x, y).status == CONSISTENT
            z = verify(g.cert(s, 13 + 5), FAST)  # anchored past the fork: decided by a link
            c, _ = resolve(x, z, {id(x): h, id(z): g})
            assert c.status == CONSISTENT


def test_directly_linked_pairs_need_no_link(histories):
    h, g = histories[5]
    x, y = verify(h.cert(6, 8), FAST), verify(g.cert(7, 8), FAST)  # same compact tree
    c = compare(x, y)
    assert c.status == CONTRADICTION
    assert c.proof.key[0] in ("node", "bridge", "record")


def test_fork_proof_checked_by_a_third_party_with_ed25519():
    h = Feed(b"\x06" * 32, scheme=ED25519).grow(20)
    g = h.fork(9).grow(14, tag=b"evil")
    x, y = verify(h.cert(12), ED25519), verify(g.cert(12), ED25519)
    c = compare(x, y)
    assert c.status == CONTRADICTION
    blob = c.proof.encode()
    report = verify_proof(blob, ED25519)  # the third party has only the proof bytes
    assert report.fid == h.fid
    assert report.cert_a.seq == 12 and report.cert_b.seq == 12


def test_bad_fork_proofs_are_rejected(histories):
    h, g = histories[2]
    x, y = verify(h.cert(9), FAST), verify(g.cert(9), FAST)
    proof = compare(x, y).proof
    same = ForkProof(x.raw, x.raw, proof.key)
    with pytest.raises(CertError) as e:
        verify_proof(same, FAST)
    assert e.value.reason == "not_a_fork"
    other = Feed(b"\x0a" * 32).grow(10)
    with pytest.raises(CertError) as e:
        verify_proof(ForkProof(x.raw, other.cert(9), proof.key), FAST)
    assert e.value.reason == "different_feeds"
    with pytest.raises(CertError):
        verify_proof(ForkProof(x.raw, y.raw, ("node", 10 ** 6)), FAST)
    blob = bytearray(proof.encode())
    blob[-5] ^= 1  # inside certificate B
    with pytest.raises(CertError):
        verify_proof(bytes(blob), FAST)
    for cut in (1, 30, len(blob) - 1):
        with pytest.raises(CertError):
            verify_proof(proof.encode()[:cut], FAST)
    with pytest.raises(CertError):
        compare(x, verify(other.cert(3), FAST))
