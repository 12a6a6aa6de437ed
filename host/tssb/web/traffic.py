"""Traffic rows: what each packet is (kind, feed, seq) and what became of it.

A tinySSB packet names no feed: a 120-byte entry or chunk is recognised only by the DMX
or hash its receiver expects (tinyssb.node). So a packet is classified *before* the host
node handles it, against the node's own tables (GOSET, WANT/CHNK DMX keyed by the GOSET
state, the next entry of every feed, the next chunk of every open side chain) and an
index of recently stored entries and chunks (to name duplicates); what the node then did
with it (stored, or dropped and why) comes from the node's events during that call.

`Tap` does this for the bridge in the same process (HostNode listeners and watchers,
the node's events, the board's event lines). `event_row` turns a board's rx line from
the event log into a coarser row for `tssb web` running alone.
"""
import collections
import json
import logging

from tinyssb import entry, goset, vectors
from tinyssb.dmx import GOSET_DMX, entry_dmx
from tinyssb.errors import WireError
from tinyssb.eventlog import packet_id
from tinyssb.node import NO_WANT

log = logging.getLogger("tssb.web")

# Stored entries (by DMX) and chunks (by hash) remembered to name duplicates; a
# duplicate is almost always recent (a neighbour re-sending what it just got).
INDEX_MAX = 8192
INDEX_PER_FEED = 16     # newest entries of each feed indexed at start
# Drops the board makes before its node sees a frame (tssbfw.radio.RadioPort.accept);
# such a frame never reaches the host as RX, so its drop line is the only trace.
# Node-level drops on the board concern packets the host also gets and judges itself.
RADIO_DROPS = frozenset(("radio_crc", "frame_too_short", "frame_too_long", "bad_crc"))
CRC_LEN = 4             # on-air frames are packet || CRC32 (tinyssb.frames)


class Index:
    """Recently stored entries (DMX -> (fid, seq)) and chunks (hash -> (fid, seq, cnr)),
    least recently added forgotten first."""

    def __init__(self, store, limit=INDEX_MAX):
        self.store = store
        self.limit = limit
        self.items = collections.OrderedDict()

    def _put(self, key, value):
        self.items.pop(key, None)
        self.items[key] = value
        while len(self.items) > self.limit:
            self.items.popitem(last=False)

    def add_entry(self, fid, seq):
        fid = bytes(fid)
        prev = entry.genesis_prev(fid) if seq == 1 else self.store.mid(fid, seq - 1)
        if prev is not None:
            self._put(entry_dmx(fid, seq, bytes(prev)), (fid, seq))

    def add_chunk(self, fid, seq, cnr):
        c = self.store.chunk(fid, seq, cnr)
        if c is not None:
            self._put(entry.chunk_hash(bytes(c)), (bytes(fid), seq, cnr))

    def add_stored(self, fid, seq):
        """Index entry seq and the chunks of its side chain held now (our own posts
        arrive whole, with no chunk events)."""
        self.add_entry(fid, seq)
        for cnr in range(self.store.chunk_count(fid, seq)):
            self.add_chunk(fid, seq, cnr)

    def add_feed(self, fid, per_feed=INDEX_PER_FEED):
        """Index the newest entries of a feed and their chunks."""
        top = self.store.front(fid)[0]
        for seq in range(max(1, top - per_feed + 1), top + 1):
            self.add_stored(fid, seq)

    def get(self, key):
        return self.items.get(bytes(key))


def classify(pkt, node, index):
    """What a packet is, judged against the host node's tables before it handles it.

    Returns: dict with kind (claim, novelty, goset, gosetx, want, chnk, entry, chunk,
    pkt120, vector), and where known feed (hex), seq, cnr, stored (True: we already hold it),
    claim, fronts, state (see Hub.packet).
    """
    d = bytes(pkt[:7])
    n = len(pkt)
    if d == GOSET_DMX:
        if n == goset.CLAIM_LEN and pkt[7] == goset.CLAIM:
            return {"kind": "claim", "claim": {
                "lo": pkt[8:40].hex(), "hi": pkt[40:72].hex(), "xor": pkt[72:104].hex(),
                "cnt": pkt[104]}}
        if n == goset.NOVELTY_LEN and pkt[7] == goset.NOVELTY:
            return {"kind": "novelty", "feed": pkt[8:40].hex()}
        return {"kind": "goset"}
    ext = getattr(node, "ext", None)
    if ext is not None and d == ext.dmx:
        return {"kind": "gosetx"}          # our nodes' coded-symbol GOSET extension
    hit = node.spaces.lookup(d)
    if hit is not None:
        # WANT/CHNK keyed by a set we know (our GOSET, our announced keys, a neighbour's)
        sp, is_want = hit
        out = {"kind": "want" if is_want else "chnk", "state": sp.state.hex()}
        if is_want and sp.keys:
            try:
                offs, seqs = vectors.decode_want(pkt)
            except WireError:
                return out
            keys = sp.keys
            # a WANT asks for each feed's next seq: the sender holds seq - 1
            # (NO_WANT marks a feed the sender does not replicate)
            out["fronts"] = {keys[(offs + i) % len(keys)].hex(): s - 1
                             for i, s in enumerate(seqs[:len(keys)]) if 1 <= s < NO_WANT}
        return out
    if n != entry.PKT_LEN:
        return {"kind": "vector"}   # WANT/CHNK of another GOSET state, or unknown
    r = node.by_dmx.get(d)
    if r is not None:
        return {"kind": "entry", "feed": r.fid.hex(), "seq": r.max_seq + 1}
    hit = index.get(d)
    if hit is not None:
        return {"kind": "entry", "feed": hit[0].hex(), "seq": hit[1], "stored": True}
    h = entry.chunk_hash(bytes(pkt))
    waiting = node.by_hash.get(h)
    if waiting:
        rep, seq = waiting[0]
        c = rep.chains.get(seq)
        return {"kind": "chunk", "feed": rep.fid.hex(), "seq": seq,
                "cnr": c.cnr if c is not None else None}
    hit = index.get(h)
    if hit is not None:
        return {"kind": "chunk", "feed": hit[0].hex(), "seq": hit[1], "cnr": hit[2],
                "stored": True}
    return {"kind": "pkt120"}


class TeeEvents:
    """An event writer that also shows every event to `watch(event, fields)`."""

    def __init__(self, inner, watch):
        self.inner = inner
        self.watch = watch

    def emit(self, event, **fields):
        self.watch(event, fields)
        if self.inner is not None:
            return self.inner.emit(event, **fields)
        return None


class Tap:
    """Traffic of the host node's ports as rows for the hub (bridge in this process).

    Wire it with `attach(hostnode)`. A fault here is logged and counted, never raised:
    the view must not stop the node from handling a packet.
    Args:
        hub: tssb.web.hub.Hub.  index: Index over the host store.
        on_store: function(fid hex) called when an entry or chunk of a feed was stored.
    """

    def __init__(self, hub, index, on_store=None):
        self.hub = hub
        self.index = index
        self.on_store = on_store or (lambda fid: None)
        self.node = None
        self._row = None
        self.errors = 0

    def attach(self, hostnode):
        self.node = hostnode.node
        hostnode.events = TeeEvents(hostnode.events, self.node_event)
        if hostnode.node.log is None:      # a host node made without an event log
            hostnode.node.log = hostnode._log
        hostnode.listeners.append(self.before)
        hostnode.watchers.append(self.after)

    def before(self, port_name, direction, pkt, info):
        """HostNode listener: before the node sees the packet."""
        try:
            self._row = self._open(port_name, pkt, info or {})
        except Exception:       # noqa: BLE001 (a bug here must not reach the node)
            self._fault()
            self._row = None

    def _fault(self):
        # one line for the user; the traceback at debug level (-v) for a bug report
        self.errors += 1
        log.warning("web view: a packet could not be shown (%d so far)", self.errors)
        log.debug("web view fault", exc_info=True)

    def _open(self, port_name, pkt, info):
        row = classify(pkt, self.node, self.index)
        src = info.get("src") or port_name
        row.update(ts=self.hub.clock(), id=packet_id(pkt), len=len(pkt),
                   dir="tx" if src == "board" else "rx", src=src, via=port_name)
        if "rssi" in info:
            row["rssi"] = info["rssi"]
            row["snr"] = info["snr"]
        return row

    def node_event(self, event, fields):
        """The node's events, while it handles a packet and at other times."""
        try:
            self._event(self._row, event, fields)
        except Exception:       # noqa: BLE001
            self._fault()

    def _event(self, row, event, fields):
        if event == "append":
            self.index.add_stored(bytes.fromhex(fields["feed"]), fields["seq"])
            self.on_store(fields["feed"])
            if row is not None:
                row.update(outcome="new", feed=fields["feed"], seq=fields["seq"])
        elif event == "chunk":
            self.index.add_chunk(bytes.fromhex(fields["feed"]), fields["seq"], fields["cnr"])
            self.on_store(fields["feed"])
            if row is not None:
                row.update(outcome="new", kind="chunk", feed=fields["feed"],
                           seq=fields["seq"], cnr=fields["cnr"])
        elif event == "goset" and row is not None:
            row["outcome"] = "new"
            row["note"] = "GOSET now %d keys" % fields["count"]
        elif event == "drop" and row is not None:
            row["outcome"] = "dropped"
            row["reason"] = fields.get("reason")

    def after(self, port_name, pkt, info):
        """HostNode watcher: after the node handled the packet."""
        row, self._row = self._row, None
        if row is not None:
            try:
                self._close(row)
            except Exception:   # noqa: BLE001
                self._fault()

    def _close(self, row):
        stored = row.pop("stored", False)
        if row.get("outcome") == "dropped" and stored and row.get("reason") == "unknown_dmx":
            row["outcome"] = "dup"      # we hold it already: the node had no use for it
            row.pop("reason")
        row.setdefault("outcome", "ok")
        self.hub.packet(row)


def handle_board_event(hub, line, rx_row=None):
    """Feed one board event line (JSON text or dict) into the hub.

    tx lines add airtime, duty_wait lines count waits, drops before the board's node
    (RADIO_DROPS) become traffic rows. rx lines are left to `rx_row` (alone mode: the
    only trace of a heard packet); with the bridge in process the RX frame says more.
    Returns: the parsed dict, or None for a line that is not an event object.
    """
    if isinstance(line, dict):
        rec = line
    else:
        try:
            rec = json.loads(line)
        except ValueError:
            return None
    if not isinstance(rec, dict):
        return None
    ev = rec.get("event")
    ts = rec.get("ts")
    ts = ts if isinstance(ts, int) and not isinstance(ts, bool) else hub.clock()
    src = rec.get("node") if isinstance(rec.get("node"), str) else "board"
    if ev == "tx":
        ms = rec.get("airtime_ms")
        if isinstance(ms, (int, float)) and not isinstance(ms, bool) and 0 <= ms <= 60000:
            hub.tx_airtime(ts, float(ms))
    elif ev == "duty_wait":
        hub.duty_wait()
    elif ev == "drop" and rec.get("reason") in RADIO_DROPS:
        hub.packet({"ts": ts, "dir": "rx", "src": "air", "via": src, "kind": "frame",
                    "len": _int(rec.get("length")), "outcome": "dropped",
                    "reason": rec["reason"]})
    elif ev == "rx" and rx_row is not None:
        row = rx_row(rec, ts)
        if row is not None:
            hub.packet(row)
    return rec


def _int(v, lo=0, hi=255):
    return v if isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi else 0


def _num(v, lo, hi):
    if isinstance(v, (int, float)) and not isinstance(v, bool) and lo <= v <= hi:
        return v
    return None


class LogClassifier:
    """Rows from a board's rx lines in the event log (`tssb web` alone): the line has
    the DMX, the frame length and RSSI/SNR, not the packet, so an entry is named from
    the index of stored entries and everything else by its DMX and length."""

    def __init__(self, index, goset_state):
        self.index = index
        self.goset_state = goset_state     # function() -> our state bytes

    def __call__(self, rec, ts):
        dmx = rec.get("dmx")
        try:
            d = bytes.fromhex(dmx) if isinstance(dmx, str) and len(dmx) == 14 else None
        except ValueError:
            d = None
        n = max(0, _int(rec.get("length")) - CRC_LEN)
        src = rec.get("src") if isinstance(rec.get("src"), str) else "air"
        row = {"ts": ts, "dir": "rx", "src": src[:64], "via": str(rec.get("node", "board"))[:64],
               "len": n, "rssi": _num(rec.get("rssi"), -200, 30),
               "snr": _num(rec.get("snr"), -50, 50), "outcome": "seen"}
        if isinstance(rec.get("pkt"), str) and len(rec["pkt"]) == 16:
            row["id"] = rec["pkt"]
        if d == GOSET_DMX:
            row["kind"] = {goset.CLAIM_LEN: "claim", goset.NOVELTY_LEN: "novelty"}.get(n, "goset")
        elif d is not None and n == entry.PKT_LEN and self.index.get(d) is not None:
            fid, seq = self.index.get(d)
            row.update(kind="entry", feed=fid.hex(), seq=seq)
        else:
            from tinyssb.dmx import chnk_dmx, want_dmx
            st = self.goset_state()
            if d is not None and d == want_dmx(st):
                row.update(kind="want", state=st.hex())
            elif d is not None and d == chnk_dmx(st):
                row.update(kind="chnk", state=st.hex())
            else:
                row["kind"] = "pkt120" if n == entry.PKT_LEN else "vector"
        return row
