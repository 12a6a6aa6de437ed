"""The Merkle descent of the clock sync: who pulls (direction from the stamps, with the
digest check as guard), pending events count as known, and REQC naming open children by
position, with its protocol errors. Nested answers and round trips: test_multilevel.py."""
import pytest

from clock_helpers import Feed, digest_of, feed_repo, pump, put, stamp_of, sync
from tssb.clock import events as E
from tssb.clock.errors import ClockError
from tssb.clock.sync import NODES, REQC, SyncMachine
from tssb.clock.wire import Reader, varint


def fronts(repo, feeds):
    return [repo.store.front(f.fid)[0] for f in feeds]


def test_only_the_lagging_side_pulls():
    """A holds everything: B's stamp is <= A's, so A never descends into B's tree; B pulls
    once and both agree after one unconverged round."""
    feeds = [Feed("lag%d" % i).extend(10) for i in range(4)]
    a, b = feed_repo(), feed_repo()
    for i, f in enumerate(feeds):
        put(a.store, f.raws)
        put(b.store, f.raws[:4 + i])
    sa, sb, ma, mb = sync(a, b)
    assert sa["ok"] and sb["ok"] and fronts(b, feeds) == [10] * 4
    assert (ma.stats["pulls"], ma.stats["pulls_skipped"], ma.stats["nodes_recv"]) == (0, 1, 0)
    assert (mb.stats["pulls"], mb.stats["pulls_skipped"]) == (1, 0) and mb.stats["nodes_recv"] > 0
    assert sa["rounds"] == sb["rounds"] == 2


def test_concurrent_sides_both_pull():
    feeds = [Feed("cc%d" % i).extend(8) for i in range(2)]
    a, b = feed_repo(), feed_repo()
    put(a.store, feeds[0].raws)
    put(a.store, feeds[1].raws[:3])
    put(b.store, feeds[0].raws[:3])
    put(b.store, feeds[1].raws)
    sa, sb, ma, mb = sync(a, b)
    assert sa["ok"] and fronts(a, feeds) == fronts(b, feeds) == [8, 8]
    assert ma.stats["pulls_skipped"] == mb.stats["pulls_skipped"] == 0


def test_wrong_skip_is_caught_by_the_next_digest_check():
    """Tiny clocks (N=4, k=1): B holds y's 4th entry, A does not, yet B's summed stamp is
    <= A's (a Bloom false positive), so A skips its pull in round 1 and B's proactive step
    sends nothing. Round 2's digests still differ, and A pulls (by now B's stamp shows
    the extra entry)."""
    x, y = Feed("fx0").extend(12), Feed("fy0").extend(4)
    a, b = feed_repo(4, 1), feed_repo(4, 1)
    put(a.store, x.raws)
    put(a.store, y.raws[:3])
    put(b.store, x.raws[:4])
    put(b.store, y.raws)
    keys = [x.fid, y.fid]
    assert stamp_of(b, keys) <= stamp_of(a, keys)      # the false positive this test needs
    sa, sb, ma, mb = sync(a, b, n=4, k=1)
    assert sa["ok"] and sb["ok"]
    assert fronts(a, [x, y]) == fronts(b, [x, y]) == [12, 4]
    assert digest_of(a, keys) == digest_of(b, keys)
    assert mb.stats["events_sent"] == 0                 # nothing reached A proactively
    assert ma.stats["pulls_skipped"] == 1 and ma.stats["pulls"] == 1
    assert sa["rounds"] == 3


def test_equal_stamps_unequal_digests_fall_back_to_both_pulls():
    """A fork branch whose one event only increments cells the other branch already
    counts leaves the feed's stamp unchanged: both stamps are equal, neither side pulls
    in round 1, and only the rule "from the second unconverged round on, both pull"
    brings the branch over (without it the sync would run into the round limit)."""
    f = Feed("fk0").extend(12)
    fork4, _ = f.entry(4, E.parse_feed_event(f.raws[2]).eid, b"other")
    a, b = feed_repo(4, 1), feed_repo(4, 1)
    put(a.store, f.raws)
    put(b.store, f.raws)
    b._insert(E.parse_feed_event(fork4))                # B also holds the fork entry
    assert stamp_of(a, [f.fid]) == stamp_of(b, [f.fid])  # the case this test needs
    assert digest_of(a, [f.fid]) != digest_of(b, [f.fid])
    sa, sb, ma, mb = sync(a, b, n=4, k=1)
    assert sa["ok"] and sb["ok"] and sa["rounds"] == 3
    for m in (ma, mb):
        assert m.stats["pulls_skipped"] == 1 and m.stats["pulls"] == 1   # round 1, round 2
    assert len(a.load(f.fid)) == 13 and digest_of(a, [f.fid]) == digest_of(b, [f.fid])
    assert [(fid, seq) for fid, seq, _ in a.forks()] == [(f.fid, 4)]


def test_pending_events_are_not_fetched_again():
    """Proactive events whose predecessor was not sent (its stamp looked known) wait in
    `pending`; the descent fetches only the missing predecessors, not them again."""
    feeds = [Feed("p2_%d" % j).extend(12) for j in range(3)]
    a, b = feed_repo(16, 2), feed_repo(16, 2)
    for f in feeds:
        put(a.store, f.raws)
        put(b.store, f.raws[:2])
    sa, sb, ma, mb = sync(a, b, n=16, k=2)
    assert sa["ok"] and fronts(b, feeds) == [12] * 3
    assert mb.stats["pended"] > 0                       # the case this test is about
    assert mb.stats["events_dup"] == 0
    assert mb.stats["events_recv"] == 30 and not mb.pending


# -- REQC ---------------------------------------------------------------------------------

def _lagging_pair():
    """Eight feeds; B lacks 9, 5 and 1 newest entries of three of them: deeper than the
    pushed root's spines reach, so B still sends REQCs."""
    feeds = [Feed("rq%d" % i).extend(12) for i in range(8)]
    a, b = feed_repo(), feed_repo()
    for f, cut in zip(feeds, [0, 9, 0, 0, 5, 0, 0, 1]):
        put(a.store, f.raws)
        put(b.store, f.raws[:12 - cut])
    return feeds, a, b


def test_reqc_names_open_children_by_position():
    """The pulled side sends its root unasked (nothing asks for it by hash); every request
    is a REQC of a few bytes: a bitmap over the open (not nested) children of one NODES."""
    feeds, a, b = _lagging_pair()
    ma, mb = SyncMachine(a, "feeds"), SyncMachine(b, "feeds")
    sent, opens = [], []

    def hook(src, msg):
        sent.append((src, msg))
        if src == "b" and msg[0] == REQC:
            opens.append(len(ma.sent_children[_ref_bits(msg)[0]]))
        return [msg]
    pump(ma, mb, hook)
    assert ma.converged and mb.converged and fronts(b, feeds) == [12] * 8
    assert not any(m[0] == 5 for _, m in sent)          # REQ (by hash) is gone
    first_nodes = next(i for i, (src, m) in enumerate(sent) if src == "a" and m[0] == NODES)
    reqcs = [(i, m) for i, (src, m) in enumerate(sent) if src == "b" and m[0] == REQC]
    assert len(reqcs) >= 2 and first_nodes < reqcs[0][0]
    for (_, m), n in zip(reqcs, opens):
        assert len(_ref_bits(m)[1]) == (n + 7) // 8      # one bit per open child
    refs = [_ref_bits(m)[0] for _, m in reqcs]
    nodes_to_b = sum(1 for src, m in sent if src == "a" and m[0] == NODES)
    assert len(set(refs)) == len(refs) and max(refs) < nodes_to_b   # one per NODES message
    assert mb.stats["trips"] == len(reqcs) + 1           # + the pushed root it expected


def _tamper_first_reqc(change):
    """Pump a lagging pair with the first REQC from B replaced by change(msg, open
    children of the NODES it names) (a list of messages); returns A's ClockError."""
    feeds, a, b = _lagging_pair()
    ma, mb = SyncMachine(a, "feeds"), SyncMachine(b, "feeds")
    done = []

    def hook(src, msg):
        if src == "b" and msg[0] == REQC and not done:
            done.append(msg)
            return change(msg, len(ma.sent_children[_ref_bits(msg)[0]]))
        return [msg]
    with pytest.raises(ClockError) as ei:
        pump(ma, mb, hook)
    assert ma.state == "error"
    return ei.value


def _ref_bits(msg):
    r = Reader(msg[1:])
    ref = r.uint()
    return ref, msg[1 + r.pos:]


def test_reqc_unknown_ref():
    e = _tamper_first_reqc(
        lambda m, n: [bytes([REQC]) + varint(_ref_bits(m)[0] + 7) + _ref_bits(m)[1]])
    assert e.reason == "req_ref"


def test_reqc_twice_for_one_message():
    e = _tamper_first_reqc(lambda m, n: [m, m])
    assert e.reason == "req_ref"


def test_reqc_empty_bitmap():
    e = _tamper_first_reqc(lambda m, n: [bytes([REQC]) + varint(_ref_bits(m)[0]) +
                                         bytes(len(_ref_bits(m)[1]))])
    assert e.reason == "req_empty"


def test_reqc_padding_bits_set():
    def pad(m, n):
        assert n % 8                                     # the bitmap has padding bits
        return [m[:-1] + bytes([m[-1] | 1 << (n % 8)])]
    assert _tamper_first_reqc(pad).reason == "req_bits"


@pytest.mark.parametrize("cut,reason", [(1, "short"), (-1, "trailing")])
def test_reqc_bitmap_length(cut, reason):
    e = _tamper_first_reqc(lambda m, n: [m[:-1] if cut == 1 else m + b"\x00"])
    assert e.reason == reason


def test_reqc_huge_ref_is_refused_without_allocation():
    e = _tamper_first_reqc(lambda m, n: [bytes([REQC]) + varint(1 << 62)])
    assert e.reason == "req_ref"
