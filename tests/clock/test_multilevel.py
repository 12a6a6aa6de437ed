"""VERSION 4 of the clock sync: fewer round trips. The pulled side sends its root unasked,
answers nest several tree levels (and, when the peer's stamp is below ours, the newest
event), entity-mode STATUS goes out with HELLO, and a STATUS may conclude a round (or
stand for ENDR). Round trips are counted like tools/bench_clock.py does (causal depth of
the messages in a lock-step pump), never timed."""
import collections

import pytest

from clock_helpers import Feed, feed_repo, pump, put, round_trips
from tssb.clock import sync as S
from tssb.clock.errors import ClockError
from tssb.clock.sync import (ENDR, HELLO, MAX_MSG_BYTES, MAX_NEST, MAX_NODES_MSG, NODES,
                             REQC, STATUS, X_FIRST, X_SECOND, SyncMachine)
from tssb.clock.wire import Reader, varint


def lagging(nf, entries=20, cut=1):
    """nf common feeds; B lacks the `cut` newest entries of the middle one."""
    feeds = [Feed("ml%d_%d" % (nf, i)).extend(entries) for i in range(nf)]
    a, b = feed_repo(), feed_repo()
    for i, f in enumerate(feeds):
        put(a.store, f.raws)
        put(b.store, f.raws[:entries - cut] if i == nf // 2 else f.raws)
    return feeds, a, b


def walk(msg):
    """{nodes, nested_leaves, depth} of a NODES message (nested nodes included)."""
    r = Reader(msg[1:])
    cnt = r.uint()
    out = {"nodes": 0, "nested_leaves": 0, "depth": 0}

    def node(depth):
        out["nodes"] += 1
        out["depth"] = max(out["depth"], depth)
        tag = r.byte()
        if tag == 0:
            r.blob()
            r.take(120 * r.uint())
            out["nested_leaves"] += depth > 0
            return
        if tag == S.N_UNKNOWN:
            r.take(32)
            return
        if tag & 0x0F == 3:
            r.blob()
        for bit in (X_FIRST, X_SECOND)[:2 if tag & 0x0F == 1 else 1]:
            node(depth + 1) if tag & bit else r.take(32)
    for _ in range(cnt):
        node(0)
    r.end()
    return out


def traced(a, b, mode="feeds", **kw):
    """Run a pair; returns (round trips, [(src, msg)], ma, mb)."""
    ma = SyncMachine(a, mode, **kw)
    mb = SyncMachine(b, mode, **{k: v for k, v in kw.items() if k != "key"})
    sent = []
    rt = round_trips(ma, mb, lambda src, msg: sent.append((src, msg)) or [msg])
    return rt, sent, ma, mb


# -- round trips ----------------------------------------------------------------------

@pytest.mark.parametrize("nf,bound", [(1, 2), (10, 4), (100, 5)])
def test_one_missing_entry_round_trips(nf, bound):
    """One entry missing among nf feeds of 20 entries (VERSION 3: 12 round trips at n=10,
    one per tree level). Handshake and pushed root, one round trip per REQC, and the
    lagging side's closing STATUS: round trips = REQCs + 2."""
    feeds, a, b = lagging(nf)
    rt, sent, ma, mb = traced(a, b)
    assert ma.converged and mb.converged and b.store.front(feeds[nf // 2].fid)[0] == 20
    reqcs = sum(1 for src, m in sent if m[0] == REQC)
    assert reqcs == mb.stats["trips"] - 1      # trips also counts the root it expected
    assert rt == reqcs + 2 <= bound
    assert mb.stats["concluded"] == 1 and ma.stats["rounds"] == mb.stats["rounds"] == 2


def _top_level_leaves(msg):
    r = Reader(msg[1:])
    r.uint()
    return msg[1 + r.pos] == 0      # first answer a LEAF (answers to REQC come one by one)


def test_event_rides_in_the_answer_when_the_peer_is_behind():
    """Ten feeds: the summed stamps hide which event B lacks (nothing proactive), but B's
    stamp is below A's, so A nests the newest event of the feed B asks for under its
    KEYED node: one REQC, and no request names the event itself."""
    feeds, a, b = lagging(10)
    rt, sent, ma, mb = traced(a, b)
    assert ma.stats["events_sent"] == 0                                  # the case meant
    answers = [m for src, m in sent if src == "a" and m[0] == NODES]
    assert [walk(m)["nested_leaves"] for m in answers] == [0, 1]
    assert not any(_top_level_leaves(m) for m in answers)
    assert sum(1 for _, m in sent if m[0] == REQC) == 1 and rt == 3
    assert mb.stats["events_recv"] == 1 and mb.stats["events_dup"] == 0


def test_no_events_nested_when_both_hold_news():
    """Concurrent stamps (each side holds entries the other lacks): nothing says which
    events the peer lacks, so answers carry events only when a REQC asks for them."""
    feeds = [Feed("cn%d" % i).extend(12) for i in range(4)]
    a, b = feed_repo(4, 1), feed_repo(4, 1)          # tiny clocks: nothing proactive
    for i, f in enumerate(feeds):
        put(a.store, f.raws[:12 if i % 2 else 7])
        put(b.store, f.raws[:7 if i % 2 else 12])
    rt, sent, ma, mb = traced(a, b, n=4, k=1)
    assert ma.converged and mb.converged
    assert [a.store.front(f.fid)[0] for f in feeds] == [12] * 4
    assert ma.stats["events_sent"] == mb.stats["events_sent"] == 0   # the case meant
    nodes = [walk(m) for _, m in sent if m[0] == NODES]
    assert nodes and all(w["nested_leaves"] == 0 for w in nodes)
    assert ma.stats["concluded"] == mb.stats["concluded"] == 0       # both sent data


@pytest.mark.parametrize("lacking", ["initiator", "responder"])
def test_entity_mode_status_goes_with_hello(lacking):
    f = Feed("ent").extend(20)
    a, b = feed_repo(), feed_repo()
    put(a.store, f.raws[:19] if lacking == "initiator" else f.raws)
    put(b.store, f.raws[:19] if lacking == "responder" else f.raws)
    assert [m[0] for m in SyncMachine(feed_repo(), "entity", key=f.fid).start()] == [HELLO, STATUS]
    rt, sent, ma, mb = traced(a, b, mode="entity", key=f.fid)
    assert ma.converged and mb.converged and rt == 2
    assert a.store.front(f.fid)[0] == b.store.front(f.fid)[0] == 20


# -- concluding STATUS --------------------------------------------------------------------

def test_lagging_side_concludes_with_its_status():
    """A sent no data it could lack and B's new digest equals A's last STATUS: B's
    STATUS(2) stands for its ENDR and ends the sync, A answers nothing."""
    feeds, a, b = lagging(10)
    rt, sent, ma, mb = traced(a, b)
    assert [m[0] for src, m in sent if src == "a" and m[0] in (STATUS, ENDR)] == [STATUS, ENDR]
    assert [m[0] for src, m in sent if src == "b" and m[0] in (STATUS, ENDR)] == [STATUS, STATUS]
    assert sent[-1][0] == "b" and sent[-1][1][0] == STATUS
    assert (ma.stats["concluded"], mb.stats["concluded"]) == (0, 1)


def test_maintenance_rounds_started_at_once_exchange_both_status():
    """A round started from idle never concludes early: here B's digest is unchanged and
    equals A's last STATUS, but A has local news (not our data), announced in its STATUS
    crossing B's. Both compare as usual and B fetches the entry."""
    f = Feed("maint").extend(6)
    a, b = feed_repo(), feed_repo()
    put(a.store, f.raws[:5])
    put(b.store, f.raws[:5])
    ma, mb = SyncMachine(a, "feeds"), SyncMachine(b, "feeds")
    pump(ma, mb)
    assert ma.converged and mb.converged
    put(a.store, f.raws[5:])
    to_b, to_a = collections.deque(ma.update()), collections.deque(mb.update())
    assert [m[0] for m in to_a] == [STATUS] and not mb.converged      # B waits for A's
    while to_a or to_b:
        if to_b:
            to_a.extend(mb.receive(to_b.popleft()))
        if to_a:
            to_b.extend(ma.receive(to_a.popleft()))
    assert ma.converged and mb.converged and b.store.front(f.fid)[0] == 6
    assert mb.stats["concluded"] == 1       # at the end of that round, after the pull


def _concluded_b():
    feeds, a, b = lagging(10)
    ma, mb = SyncMachine(a, "feeds"), SyncMachine(b, "feeds")
    pump(ma, mb)
    assert mb.converged and mb.round == 2 and 2 not in mb.peer_status
    digest, stamp = ma.my_status[2]
    return mb, digest, stamp


def test_status_crossing_a_conclusion_is_accepted_when_it_agrees():
    mb, digest, stamp = _concluded_b()
    assert mb.receive(bytes([STATUS]) + varint(2) + varint(0) + stamp.encode() + digest) == []
    assert mb.converged


def test_status_crossing_a_conclusion_after_a_maintenance_round_started():
    """B concluded round 2 and starts round 3 (new local events) before the peer's
    crossing STATUS(2) arrives: it is still accepted, round 3 goes on."""
    mb, digest, stamp = _concluded_b()
    assert [m[0] for m in mb.update()] == [STATUS] and mb.round == 3
    assert mb.receive(bytes([STATUS]) + varint(2) + varint(0) + stamp.encode() + digest) == []
    assert mb.state == "round" and mb.round == 3 and 3 not in mb.peer_status


def test_status_crossing_a_conclusion_with_another_digest_is_refused():
    mb, digest, stamp = _concluded_b()
    with pytest.raises(ClockError) as ei:
        mb.receive(bytes([STATUS]) + varint(2) + varint(0) + stamp.encode() + bytes(32))
    assert ei.value.reason == "status_conflict"


def _first_status_from_a(change):
    """Pump lagging(10) with A's first STATUS replaced by change(msg); B's ClockError."""
    feeds, a, b = lagging(10)
    ma, mb = SyncMachine(a, "feeds"), SyncMachine(b, "feeds")
    done = []

    def hook(src, msg):
        if src == "a" and msg[0] == STATUS and not done:
            done.append(msg)
            return change(msg)
        return [msg]
    with pytest.raises(ClockError) as ei:
        pump(ma, mb, hook)
    assert mb.state == "error"
    return ei.value


def test_status_acking_more_data_than_we_sent_is_refused():
    e = _first_status_from_a(lambda m: [m[:2] + varint(5) + m[3:]])   # round 1, ack 0 -> 5
    assert (e.reason, e.detail) == ("ack", 5)


def test_status_of_the_next_round_while_our_descent_is_open_is_refused():
    e = _first_status_from_a(lambda m: [m, bytes([STATUS]) + varint(2) + m[2:]])
    assert e.reason == "round"


# -- malformed or oversized answers ---------------------------------------------------------

def _pushed_root_replaced(change):
    """Pump lagging(10) with the root A pushes replaced by change(msg); B's ClockError."""
    feeds, a, b = lagging(10)
    ma, mb = SyncMachine(a, "feeds"), SyncMachine(b, "feeds")
    done = []

    def hook(src, msg):
        if src == "a" and msg[0] == NODES and not done:
            done.append(msg)
            assert walk(msg)["nested_leaves"] == 0      # so it ends in a child's hash
            return [change(msg)]
        return [msg]
    with pytest.raises(ClockError) as ei:
        pump(ma, mb, hook)
    assert mb.state == "error" and done
    return ei.value


def _nodes(*parts):
    return bytes([NODES]) + varint(len(parts)) + b"".join(parts)


def _full(depth):
    """A full INNER tree `depth` levels deep, hashes below the last."""
    if depth == 1:
        return bytes([0x01]) + bytes(64)
    return bytes([0x01 | X_FIRST | X_SECOND]) + _full(depth - 1) + _full(depth - 1)


H = bytes(range(32))


@pytest.mark.parametrize("change,reason", [
    (lambda m: m[:-1] + bytes([m[-1] ^ 1]), "unrequested_node"),   # a nested child's hash
    (lambda m: m[:-1], "short"),
    (lambda m: m + b"\x00", "trailing"),
    (lambda m: _nodes(bytes([0x01 | X_FIRST, 0xFF]) + H + H), "node_nested"),
    (lambda m: _nodes(bytes([0x41]) + H + H), "node_tag"),              # unknown flag bit
    (lambda m: _nodes(bytes([0x02 | X_SECOND]) + H), "node_tag"),       # FORK has one child
    (lambda m: _nodes(bytes([0x03 | X_SECOND, 1, 7]) + H), "node_tag"),  # KEYED too
    (lambda m: _nodes(bytes([0x04]) + H), "node_tag"),                  # EMPTY is no node
    (lambda m: _nodes(bytes([0x02 | X_FIRST]) * (MAX_NEST + 1) + H), "node_depth"),
    (lambda m: _nodes(_full(12)), "node_count"),                        # 4095 nodes > 2048
])
def test_malformed_nested_answer_is_refused(change, reason):
    assert _pushed_root_replaced(change).reason == reason


def test_nested_event_is_validated():
    """An event nested in an answer is checked like any other (here its signature)."""
    feeds, a, b = lagging(10)
    ma, mb = SyncMachine(a, "feeds"), SyncMachine(b, "feeds")

    def hook(src, msg):
        if src == "a" and msg[0] == NODES and walk(msg)["nested_leaves"]:
            assert msg[-1] == 0                          # ends: event, 0 chunks
            return [msg[:-2] + bytes([msg[-2] ^ 1]) + msg[-1:]]
        return [msg]
    with pytest.raises(ClockError) as ei:
        pump(ma, mb, hook)
    assert ei.value.reason == "signature" and b.store.front(feeds[5].fid)[0] == 19


def test_answers_stay_within_one_message():
    """150 feeds, B lacks two side-chained posts of each, tiny clocks (nothing proactive):
    the stamps say nearly every feed differs and B is behind, so A nests them all with
    their newest events and chunks; each answer is cut at one message and the rest
    follows by REQC."""
    feeds = [Feed("wide%d" % i).extend(1).post(b"x" * 300).post(b"y" * 300) for i in range(150)]
    a, b = feed_repo(4, 1), feed_repo(4, 1)
    for f in feeds:
        put(a.store, f.raws, f.chunks)
        put(b.store, f.raws[:1])
    rt, sent, ma, mb = traced(a, b, n=4, k=1)
    assert ma.converged and mb.converged and ma.stats["events_sent"] == 0
    assert all(b.store.front(f.fid)[0] == 3 and b.store.chunk_count(f.fid, 3) == 3 for f in feeds)
    nodes = [(len(m), walk(m)) for src, m in sent if m[0] == NODES]
    assert nodes[0][1]["nested_leaves"] > 50                            # the case meant
    assert max(n for n, _ in nodes) > MAX_MSG_BYTES - 1024               # the bound is reached
    assert all(n <= MAX_MSG_BYTES and w["nodes"] <= MAX_NODES_MSG for n, w in nodes)
