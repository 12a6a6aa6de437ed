"""An adversarial peer: every inconsistency aborts with a reason, nothing invalid is stored."""
import random

import pytest

from tssb.trdag import dagstore, message, session, wire
from tssb.trdag.errors import TrdagError

from dagutil import copy_into, grow, member_ids, new_dag, pump, sessions


def scenario(seed=1, n=200):
    """a and b share n messages; b also has one concurrent message deep inside."""
    rng = random.Random(seed)
    a, root, authors = new_dag(seed, n_authors=6)
    msgs = grow(a, root, authors[:2], n, rng)
    b = a.copy()
    fork = dagstore.MemDagIndex()
    copy_into(fork, [a.get(root)] + msgs[:n // 2])
    extra = dagstore.post(fork, authors[2], root, "only b")
    dagstore.Dag(b).offer(extra)
    return a, b, root, authors, fork


def all_valid(idx, root):
    """Re-admit every stored message into a fresh index: each must validate again."""
    fresh = dagstore.Dag(dagstore.MemDagIndex())
    for d, mid in sorted([(0, root)] + idx.members(root)):
        fresh.offer(message.parse_element(idx.get(mid).element()))
    return True


def run(a, b, root, mutate=None, drop=None, opt=session.BASIC, bsession=None):
    sa, sb = sessions(a, b, root, opt)
    if bsession is not None:
        sb = bsession
    before = set(member_ids(a, root))
    ea, eb = pump(sa, sb, mutate, drop)
    assert ea is not None, "honest side must abort"
    assert all_valid(a, root)
    return ea, before


def on_round(n, fn):
    """Mutate b's round-n body (single-frame rounds in these scenarios)."""
    def mutate(f):
        if f[0] == wire.ROUND and f[1] == n:
            return bytes((wire.ROUND,)) + fn(bytearray(f[1:]))
        return f
    return mutate


def test_wrong_total_count_in_hello():
    a, b, root, *_ = scenario()

    def mutate(f):
        if f[0] == wire.HELLO:
            h = wire.parse_hello(f, session.MAX_COUNT)
            return wire.hello(h["has_root"], h["mode"], h["levels"], h["cutoff"], h["hash_len"],
                              h["root"], h["nonce"], h["depth"], h["total"] + 1)
        return f
    ea, _ = run(a, b, root, mutate)
    assert ea.reason == "wrong_count"


def _set_count(c):
    def fn(body):
        body[1] = c          # first explicit aggregate's count (1-byte varint)
        return bytes(body)
    return fn


def test_child_count_above_parent_is_inconsistent():
    a, b, root, *_ = scenario(n=100)      # tree (1,64): b's parent count 65, child 32
    ea, before = run(a, b, root, on_round(2, _set_count(100)))
    assert ea.reason == "inconsistent_aggregate"
    assert set(member_ids(a, root)) == before


def test_empty_child_with_nonzero_xor_is_inconsistent():
    a, b, root, *_ = scenario()
    ea, _ = run(a, b, root, on_round(2, _set_count(0)))
    assert ea.reason == "inconsistent_aggregate"


def test_tampered_child_xor_is_caught_later():
    a, b, root, *_ = scenario()

    def fn(body):
        body[5] ^= 0x40      # inside the first aggregate's XOR: children no longer add up
        return bytes(body)
    ea, _ = run(a, b, root, on_round(2, fn))
    # the two ends now walk different nodes: whichever check sees it first aborts
    assert ea.reason in ("ids_mismatch_aggregate", "inconsistent_aggregate", "final_mismatch",
                         "missing_messages", "truncated_frame", "trailing_bytes")


class LyingIds(session.SyncSession):
    """Sends ID lists that do not match its aggregates."""

    def _round_body(self):
        body = bytearray(session.SyncSession._round_body(self))
        if self._slots:
            body[-1] ^= 1
        return bytes(body)


def test_id_list_not_matching_aggregate():
    a, b, root, *_ = scenario()
    liar = LyingIds(dagstore.Dag(b), None, False)
    ea, _ = run(a, b, root, bsession=liar)
    assert ea.reason == "ids_mismatch_aggregate"


def test_unannounced_message_is_refused_and_not_stored():
    a, b, root, authors, fork = scenario()
    x = dagstore.post(fork, authors[3], root, "never announced")
    sent = []

    def mutate(f):
        if f[0] == wire.DATA and not sent:
            sent.append(1)
            return bytes((wire.DATA,)) + x.element()
        return f
    ea, _ = run(a, b, root, mutate)
    assert ea.reason == "unexpected_message" and not a.has(x.mid)


def test_message_with_bad_signature_is_refused():
    a, b, root, *_ = scenario()

    def mutate(f):
        if f[0] == wire.DATA:
            f = bytearray(f)
            f[1 + 56 + 80] ^= 1          # inside the entry's signature
            return bytes(f)
        return f
    ea, before = run(a, b, root, mutate)
    assert ea.reason == "bad_message" and set(member_ids(a, root)) == before


def test_announced_message_never_sent():
    a, b, root, *_ = scenario()
    ea, _ = run(a, b, root, drop=lambda f: f[0] == wire.DATA)
    assert ea.reason == "missing_messages"


def test_message_with_false_depth_is_refused():
    a, b, root, authors, _ = scenario()
    liar = message.create(authors[4], root, [root], 5, "depth 5, child depth 0")
    b.put(liar)                      # the adversary's index skips admission
    ea, _ = run(a, b, root)
    assert ea.reason == "bad_depth" and not a.has(liar.mid)


def test_tampered_final():
    a, b, root, *_ = scenario()

    def mutate(f):
        if f[0] == wire.FINAL:
            f = bytearray(f)
            f[-1] ^= 1
            return bytes(f)
        return f
    ea, _ = run(a, b, root, mutate)
    assert ea.reason == "final_mismatch"


def test_garbage_frames():
    for junk in (b"", bytes((wire.ROUND,)) + b"\xff" * 9, bytes((99,)),
                 bytes((wire.DATA,)) + bytes(10), bytes((wire.HELLO, 1))):
        a, root, _ = new_dag(3)
        s = session.SyncSession(dagstore.Dag(a), root, True)
        s.start()
        with pytest.raises(TrdagError):
            s.receive(junk)
        assert s.done and not s.ok


def test_oversized_round_is_refused():
    a, root, _ = new_dag(4)
    s = session.SyncSession(dagstore.Dag(a), root, True)
    r = session.SyncSession(dagstore.Dag(a.copy()), None, False)
    s.receive(r.receive(s.start()[0])[0])          # HELLOs exchanged
    part = bytes((wire.PART,)) + bytes(wire.PART_SIZE)
    with pytest.raises(TrdagError) as e:
        for _ in range(wire.MAX_ROUND_BYTES // wire.PART_SIZE + 2):
            s.receive(part)
    assert e.value.reason == "round_too_large"
