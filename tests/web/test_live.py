"""The live model without a server: packet classification and fate, the hub's bounded
aggregates, the event-log follower, feed names."""
import asyncio
import json
import os

from tinyssb import bipf, crypto, entry, vectors
from tinyssb.dmx import want_dmx
from tinyssb.goset import GOSet
from tinyssb.store import MemStore
from tssb.bridge.hostnode import HostNode
from tssb.context import Identity
from tssb.store import Store
from tssb.web import eventlog as evmod
from tssb.web import hub as hubmod
from tssb.web import feeds as feedsmod
from tssb.web.feeds import FeedIndex
from tssb.web.hub import Airtime, Hub, Neighbours
from tssb.web.rig import author_feed
from tssb.web.traffic import Index, LogClassifier, Tap, handle_board_event

SEED_A = b"\x0a" * 32
SEED_B = b"\x0b" * 32


class Port:
    name = "serial"

    def __init__(self):
        self.sent = []

    def send(self, pkt):
        self.sent.append(pkt)


def _host_with_tap():
    h = HostNode(Store(":memory:"), Identity.generate())
    g = h.node.goset
    hub = Hub(clock=lambda: 1000, goset=lambda: (g.keys, g.state))
    index = Index(h.store)
    stored = []
    Tap(hub, index, stored.append).attach(h)
    return h, hub, index, stored


def test_tap_names_each_packet_and_its_fate():
    h, hub, index, stored = _host_with_tap()
    src = MemStore()
    fa = author_feed(src, SEED_A, [b"one", b"two", ("long " * 40).encode()])
    h.node.follow(fa)
    port = Port()
    air = {"rssi": -91, "snr": 6.25, "src": "air"}
    # entries in order: new; the same again: a duplicate; a chunk of the side chain
    h.receive(src.entry(fa, 1), port, air)
    h.receive(src.entry(fa, 1), port, air)
    h.receive(src.entry(fa, 2), port, {"src": "board"})
    h.receive(src.entry(fa, 3), port, air)
    h.receive(src.chunk(fa, 3, 0), port, air)
    h.receive(src.chunk(fa, 3, 0), port, air)
    h.receive(b"\x99" * 120, port, air)
    h.receive(b"\x01\x02", port, air)
    rows = list(hub.traffic)
    got = [(r["kind"], r.get("seq"), r.get("cnr"), r["outcome"], r.get("reason")) for r in rows]
    assert got == [("entry", 1, None, "new", None), ("entry", 1, None, "dup", None),
                   ("entry", 2, None, "new", None), ("entry", 3, None, "new", None),
                   ("chunk", 3, 0, "new", None), ("chunk", 3, 0, "dup", None),
                   ("pkt120", None, None, "dropped", "unknown_dmx"),
                   ("vector", None, None, "dropped", "bad_length")]
    assert all(r["feed"] == fa.hex() for r in rows[:6])
    assert rows[0]["rssi"] == -91 and rows[0]["snr"] == 6.25 and rows[0]["src"] == "air"
    assert rows[2]["dir"] == "tx" and rows[2]["src"] == "board" and "rssi" not in rows[2]
    assert rows[0]["id"] != rows[3]["id"] and len(rows[0]["id"]) == 16
    assert hub.drops == {"unknown_dmx": 1, "bad_length": 1}
    assert set(stored) == {fa.hex()}
    # neighbours: air and board counted apart, air with its last signal
    n = {x["src"]: x for x in hub.neighbours.rows()}
    assert n["air"]["packets"] == 7 and n["board"]["packets"] == 1
    assert n["air"]["rssi"] == -91
    # our own long post, echoed back by the board: the entry and its chunks are known
    seq = h.post(b"our own long post " * 20)
    own = h.node.author.fid
    h.receive(h.store.entry(own, seq), port, {"src": "board"})
    h.receive(h.store.chunk(own, seq, 1), port, {"src": "board"})
    echo = list(hub.traffic)[-2:]
    assert [(r["kind"], r["seq"], r.get("cnr"), r["outcome"]) for r in echo] == [
        ("entry", seq, None, "dup"), ("chunk", seq, 1, "dup")]


def test_goset_claims_and_wants_give_agreement_and_peer_fronts():
    h, hub, index, _ = _host_with_tap()
    src = MemStore()
    fa = author_feed(src, SEED_A, [b"a1", b"a2", b"a3"])
    h.node.follow(fa)
    g = h.node.goset
    keys, state = list(g.keys), g.state
    port = Port()
    # a peer's full claim of the same set, then a WANT keyed by our state: it holds 3 of fa
    h.receive(g.full_claim(), port, {"src": "air", "rssi": -80, "snr": 2.0})
    idx = keys.index(fa)
    from tinyssb.node import NO_WANT
    seqs = [5 if k == fa else NO_WANT for k in keys]   # only fa replicated there
    h.receive(vectors.encode_want(want_dmx(state), 0, seqs), port, {"src": "board"})
    snap = hub.snapshot()
    by = {n["src"]: n for n in snap["neighbours"]}
    assert by["air"]["agree"] == "yes" and by["air"]["claim"]["cnt"] == len(keys)
    assert by["board"]["agree"] == "yes"
    assert snap["fronts"] == {fa.hex(): {"board": 4}} and idx >= 0
    # a claim over our whole range with two keys more inside it: not in agreement (with
    # one, the CNT=3 shortcut would name it and we would agree at once)
    other = GOSet()
    for k in keys:
        other.add(k)
    for d in (1, 2):
        other.add((int.from_bytes(keys[0], "big") + d).to_bytes(32, "big"))
    h.receive(other.full_claim(), port, {"src": "air"})
    by = {n["src"]: n for n in hub.snapshot()["neighbours"]}
    assert by["air"]["agree"] == "no"


def test_board_lines_airtime_waits_and_radio_drops():
    hub = Hub(clock=lambda: 5_000_000)
    handle_board_event(hub, json.dumps({"event": "tx", "ts": 4_990_000, "airtime_ms": 71.9}))
    handle_board_event(hub, {"event": "tx", "ts": 4_995_000, "airtime_ms": 205.1})
    handle_board_event(hub, {"event": "duty_wait", "wait_ms": 10})
    handle_board_event(hub, {"event": "drop", "reason": "bad_crc", "length": 40, "node": "b1"})
    handle_board_event(hub, {"event": "drop", "reason": "unknown_dmx", "length": 40})
    for bad in ("not json", "[1]", json.dumps({"event": "tx", "airtime_ms": "x"}),
                json.dumps({"event": "tx", "airtime_ms": 1e9}), json.dumps({"event": "drop"})):
        handle_board_event(hub, bad)
    a = hub.snapshot()["airtime"]
    assert a["used_ms"] == 277.0 and a["frames"] == 2 and a["waits"] == 1
    assert [(r["kind"], r["reason"], r["via"]) for r in hub.traffic] == [("frame", "bad_crc", "b1")]


def test_airtime_window_and_bounded_aggregates():
    a = Airtime()
    hour = hubmod.AIRTIME_WINDOW_MS
    for t in range(0, 2 * hour, 30000):       # one 100 ms frame every 30 s for two hours
        a.add(t, 100.0)
    used, frames = a.used(2 * hour - 1)
    assert frames == 120 and used == 12000.0
    assert len(a.buckets) <= hour // hubmod.AIRTIME_BUCKET_MS
    n = Neighbours(limit=4)
    for i in range(10):
        n.heard("node%d" % i, i, 10, "entry")
    assert [x["src"] for x in n.rows()] == ["node9", "node8", "node7", "node6"]
    hub = Hub(traffic_keep=5)
    for i in range(20):
        hub.packet({"ts": i, "dir": "rx", "src": "s%d" % i, "kind": "x", "len": 1})
    assert len(hub.traffic) == 5 and len(hub.neighbours.by_src) == 20


def test_client_queue_is_bounded_and_reports_its_gap():
    async def main():
        c = hubmod.Client(limit=3)
        for i in range(10):
            c.offer("m%d" % i)
        assert c.queue.qsize() == 3 and c.skipped_total == 7
        got = [await c.next() for _ in range(3)]
        c.offer("m10")
        got.append(await c.next())
        return got
    got = asyncio.run(main())
    assert got[:3] == [["m0"], ["m1"], ["m2"]]
    assert got[3] == [json.dumps({"t": "gap", "skipped": 7}), "m10"]

    async def by_bytes():
        c = hubmod.Client(limit=100, limit_bytes=1000)
        for i in range(10):
            c.offer("x" * 300)
        assert c.queue.qsize() == 3 and c.bytes == 900 and c.skipped_total == 7
        await c.next()
        assert c.bytes == 600
    asyncio.run(by_bytes())


def test_log_rows_name_stored_entries_by_dmx():
    store = Store(":memory:")
    fa = author_feed(store, SEED_A, [b"x", b"y"])
    index = Index(store)
    index.add_feed(fa)
    dmx = store.entry(fa, 2)[:7].hex()
    rows = LogClassifier(index, lambda: bytes(32))
    r = rows({"event": "rx", "dmx": dmx, "length": 124, "rssi": -88, "snr": 3.5,
              "node": "b1", "kind": "pkt120"}, 7)
    assert (r["kind"], r["feed"], r["seq"], r["len"], r["rssi"]) == ("entry", fa.hex(), 2, 120, -88)
    r = rows({"event": "rx", "dmx": "zz" * 7, "length": 999, "rssi": "loud", "snr": 1e9}, 7)
    assert r["kind"] == "vector" and r["rssi"] is None and r["snr"] is None and r["len"] == 0
    r = rows({"event": "rx", "dmx": want_dmx(bytes(32)).hex(), "length": 20}, 7)
    assert r["kind"] == "want"


def test_follower_backlog_appends_garbage_and_rotation(tmp_path):
    path = str(tmp_path / "events.jsonl")
    got = []
    f = evmod.Follower(path, got.append)
    assert f.poll() == 0                          # no file yet
    with open(path, "w") as out:
        out.write(json.dumps({"event": "a"}) + "\n")
    f.poll()
    with open(path, "a") as out:
        out.write("not json\n[1,2]\n" + json.dumps({"event": "b"}) + "\n" + '{"event": "c"')
    f.poll()
    assert [e["event"] for e in got] == ["a", "b"] and f.bad == 2
    with open(path, "a") as out:                  # the rest of a line written in two parts
        out.write(', "x": 1}\n' + "y" * (evmod.MAX_LINE + 10))
    f.poll()
    with open(path, "a") as out:
        out.write("y" * 100 + "\n" + json.dumps({"event": "d"}) + "\n")
    f.poll()
    assert [e["event"] for e in got] == ["a", "b", "c", "d"] and f.bad == 3
    os.rename(path, path + ".1")                  # rotated: the new file from its start
    with open(path, "w") as out:
        out.write(json.dumps({"event": "e"}) + "\n")
    f.poll()
    assert got[-1]["event"] == "e"


def test_follower_starts_with_a_bounded_backlog(tmp_path):
    path = str(tmp_path / "events.jsonl")
    line = json.dumps({"event": "old", "pad": "p" * 200}) + "\n"
    with open(path, "w") as out:
        out.write(line * (2 * evmod.BACKLOG_BYTES // len(line)))
        out.write(json.dumps({"event": "last"}) + "\n")
    got = []
    evmod.Follower(path, got.append).poll()
    assert got[-1]["event"] == "last"
    assert len(got) <= evmod.BACKLOG_BYTES // len(line) + 1


def test_feed_names_from_iam_even_when_its_side_chain_comes_later():
    src = MemStore()
    fa = author_feed(src, SEED_A, [bipf.encode(["IAM", "A long display name " * 3]), b"hi"])
    dst = Store(":memory:")
    dst.add_feed(fa)
    idx = FeedIndex(dst)
    prev = entry.genesis_prev(fa)
    for seq in (1, 2):
        pkt = src.entry(fa, seq)
        mid = entry.mid_of(entry.nam(fa, seq, prev), pkt)
        dst.append(fa, seq, pkt, mid)
        prev = mid
    (s,) = idx.refresh()
    assert s["front"] == 2 and s["name"] is None            # the chain is not there yet
    for k in range(src.chunk_count(fa, 1)):
        dst.put_chunk(fa, 1, k, src.chunk(fa, 1, k))
    idx.missing = lambda fid: 0                              # what the node would report
    (s,) = idx.refresh()
    assert s["name"] == ("A long display name " * 3).strip()
    assert idx.refresh() == []
    assert crypto.publickey(SEED_A) == fa
    # a display name is cut to NAME_MAX (an IAM may hold 64 KiB)
    fb = author_feed(dst, SEED_B, [bipf.encode(["IAM", "n" * 5000])])
    (s,) = idx.refresh({fb})
    assert s["name"] == "n" * feedsmod.NAME_MAX


def test_a_fault_in_the_view_never_stops_the_node(monkeypatch):
    from tssb.web import traffic
    h, hub, index, _ = _host_with_tap()
    src = MemStore()
    fa = author_feed(src, SEED_A, [b"one"])
    h.node.follow(fa)

    def broken(*a):
        raise RuntimeError("view bug")
    monkeypatch.setattr(traffic, "classify", broken)
    monkeypatch.setattr(hub, "packet", broken)
    h.receive(src.entry(fa, 1), Port(), {"src": "air"})
    assert h.store.front(fa)[0] == 1          # stored all the same
    tap = next(w.__self__ for w in h.watchers)
    assert tap.errors >= 1
