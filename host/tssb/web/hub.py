"""What the page shows live, and the browsers it goes to.

`Hub` keeps the recent traffic rows and the aggregates built from them (neighbours heard,
GOSET claims, peers' feed fronts, airtime, host syncs), each bounded by a named limit,
and fans every update out to the connected browsers. A browser is a `Client` with a
bounded queue: when it reads too slowly its queue fills, later messages for it are
skipped and counted, and it is told how many it missed once it catches up. So a slow or
stalled browser costs at most CLIENT_QUEUE messages plus the socket's write buffer, never
more, and never slows the node or the other browsers.

Everything here runs in the asyncio loop of the bridge (or of `tssb web` alone); nothing
blocks.
"""
import asyncio
import collections
import json
import time

# Rows kept for a browser that connects (the traffic view's backlog) and in the view.
TRAFFIC_KEEP = 500
# Messages queued per browser before it counts as slow and messages for it are skipped.
# At the benchmark's 20 packets/s this is ~12 s of traffic (rows are ~300 bytes).
CLIENT_QUEUE = 256
# ... and bytes: messages differ in size (a feeds update may list every feed), so the
# count alone would not bound memory. 32 browsers x 1 MiB is the worst case.
CLIENT_BYTES = 1024 * 1024
# Browsers connected at once; each costs a queue and a socket (bounds memory).
MAX_CLIENTS = 32
# Distinct packet sources remembered (ports, simulator nodes); the least recently
# heard is forgotten first. Sources come from our own ports and the local event log.
MAX_NEIGHBOURS = 64
# Host syncs listed (sync_done events).
SYNCS_KEEP = 50
# Airtime is summed in one-minute buckets over the regulatory window (one hour for the
# ETSI duty cycle, tssbfw.regions.HOUR_MS): 60 numbers, whatever the packet rate.
AIRTIME_BUCKET_MS = 60000
AIRTIME_WINDOW_MS = 3600000


def wall_ms():
    return int(time.time() * 1000)


class Client:
    """One connected browser: a bounded queue of JSON texts and a skip counter.

    A message that finds the queue full is skipped; the next one queued carries the
    number skipped before it, so the browser learns where its gap is.
    """

    def __init__(self, limit=CLIENT_QUEUE, limit_bytes=CLIENT_BYTES):
        self.queue = asyncio.Queue(limit)
        self.limit_bytes = limit_bytes
        self.bytes = 0            # queued
        self.skipped = 0          # skipped since the last queued message
        self.skipped_total = 0

    def offer(self, text):
        if self.bytes + len(text) > self.limit_bytes or self.queue.full():
            self.skipped += 1
            self.skipped_total += 1
            return
        self.queue.put_nowait((self.skipped, text))
        self.bytes += len(text)
        self.skipped = 0

    async def next(self):
        """The next texts to send: a gap notice first when messages were skipped."""
        skipped, text = await self.queue.get()
        self.bytes -= len(text)
        if skipped:
            return [json.dumps({"t": "gap", "skipped": skipped}), text]
        return [text]


class Neighbours:
    """Packet sources with counts, last RSSI/SNR, last GOSET claim and state seen."""

    def __init__(self, limit=MAX_NEIGHBOURS):
        self.limit = limit
        self.by_src = collections.OrderedDict()   # least recently heard first

    def heard(self, src, ts, length, kind, rssi=None, snr=None):
        n = self.by_src.pop(src, None)
        if n is None:
            n = {"src": src, "packets": 0, "bytes": 0, "rssi": None, "snr": None,
                 "first": ts, "last": ts, "kinds": {}, "claim": None, "state": None,
                 "state_ts": None}
            if len(self.by_src) >= self.limit:
                self.by_src.popitem(last=False)
        self.by_src[src] = n
        n["packets"] += 1
        n["bytes"] += length
        n["last"] = ts
        n["kinds"][kind] = n["kinds"].get(kind, 0) + 1
        if rssi is not None:
            n["rssi"] = rssi
            n["snr"] = snr
        return n

    def rows(self):
        return [dict(n, kinds=dict(n["kinds"])) for n in reversed(self.by_src.values())]


class Airtime:
    """Airtime of the board's transmissions, summed per minute over the last hour."""

    def __init__(self, bucket_ms=AIRTIME_BUCKET_MS, window_ms=AIRTIME_WINDOW_MS):
        self.bucket_ms = bucket_ms
        self.n = window_ms // bucket_ms
        self.buckets = collections.deque()   # [bucket index, ms, frames], oldest first
        self.longest_ms = 0.0
        self.frames = 0
        self.waits = 0

    def add(self, ts, ms):
        b = ts // self.bucket_ms
        if self.buckets and self.buckets[-1][0] == b:
            self.buckets[-1][1] += ms
            self.buckets[-1][2] += 1
        elif not self.buckets or b > self.buckets[-1][0]:
            self.buckets.append([b, ms, 1])
        else:   # a late line (clock step): count it in the newest bucket, never lose it
            self.buckets[-1][1] += ms
            self.buckets[-1][2] += 1
        while len(self.buckets) > self.n:
            self.buckets.popleft()
        self.frames += 1
        self.longest_ms = max(self.longest_ms, ms)

    def used(self, now):
        """(ms, frames) in the window ending now (whole minutes: may over-count by up to
        one minute's airtime, never under-count, like the board's limiter)."""
        first = now // self.bucket_ms - self.n + 1
        ms = frames = 0
        for b, m, f in self.buckets:
            if b >= first:
                ms += m
                frames += f
        return ms, frames


class Hub:
    """Live state and fan-out.

    Args:
        clock: function() -> Unix ms (rows and "last heard" times).
        goset: function() -> (keys, state) of the host's GOSET, for agreement.
    """

    def __init__(self, clock=wall_ms, goset=None, traffic_keep=TRAFFIC_KEEP,
                 max_clients=MAX_CLIENTS):
        self.clock = clock
        self.goset = goset or (lambda: ([], bytes(32)))
        self.traffic = collections.deque(maxlen=traffic_keep)
        self.neighbours = Neighbours()
        self.airtime = Airtime()
        self.syncs = collections.deque(maxlen=SYNCS_KEEP)
        self.fronts = {}         # fid hex -> {src: (front, ts)} from peers' WANT vectors
        self.drops = {}          # reason -> count
        self.board = {}          # the board: hello, status, plan, link counters
        self.clients = set()
        self.max_clients = max_clients
        self.published = 0

    # -- clients ---------------------------------------------------------------------

    def add_client(self):
        """A new Client, or None when MAX_CLIENTS are connected."""
        if len(self.clients) >= self.max_clients:
            return None
        c = Client()
        self.clients.add(c)
        return c

    def remove_client(self, c):
        self.clients.discard(c)

    def publish(self, kind, **fields):
        fields["t"] = kind
        text = json.dumps(fields, separators=(",", ":"))
        self.published += 1
        for c in self.clients:
            c.offer(text)

    # -- inputs ----------------------------------------------------------------------

    def packet(self, row):
        """A packet seen (rx on a port or sent by the board): a traffic row.

        row: dict with at least ts, dir, src, kind, len; optional rssi, snr, feed, seq,
        cnr, outcome, reason, id, claim (cnt, xor hex, lo hex, hi hex), fronts
        ({fid hex: front}) and state (our GOSET state hex when the packet used it).
        """
        claim = row.pop("claim", None)
        fronts = row.pop("fronts", None)
        state = row.pop("state", None)
        self.traffic.append(row)
        if row.get("outcome") == "dropped":
            r = row.get("reason") or "?"
            self.drops[r] = self.drops.get(r, 0) + 1
        if row["dir"] == "rx" or row["src"] == "board":
            n = self.neighbours.heard(row["src"], row["ts"], row["len"], row["kind"],
                                      row.get("rssi"), row.get("snr"))
            if claim is not None:
                n["claim"] = dict(claim, ts=row["ts"])
            if state is not None:
                n["state"] = state
                n["state_ts"] = row["ts"]
            if fronts:
                for fid, front in fronts.items():
                    self.fronts.setdefault(fid, {})[row["src"]] = (front, row["ts"])
                self._trim_fronts()
        self.publish("pkt", row=row)

    def _trim_fronts(self):
        # only feeds of our GOSET and sources still remembered: bounded by both limits
        keys = {k.hex() for k in self.goset()[0]}
        srcs = self.neighbours.by_src
        for fid in list(self.fronts):
            if fid not in keys:
                del self.fronts[fid]
                continue
            per = self.fronts[fid]
            for s in list(per):
                if s not in srcs:
                    del per[s]

    def tx_airtime(self, ts, ms):
        self.airtime.add(ts, ms)

    def duty_wait(self):
        self.airtime.waits += 1

    def sync(self, rec):
        """A host sync ended (a sync_done event)."""
        self.syncs.append(rec)
        self.publish("sync", sync=rec)

    # -- views -----------------------------------------------------------------------

    def agreement(self, n, keys, state):
        """Whether neighbour n holds our GOSET: 'yes', 'no' or 'unknown'.

        A WANT/CHNK with our DMX proves the same set (their DMX is keyed by the state);
        a claim naming our count and XOR over our range says so too; a claim spanning
        our whole range with another count or XOR says not.
        """
        st = state.hex()
        if n["state"] == st:
            return "yes"
        c = n["claim"]
        if c is None or not keys:
            return "unknown"
        if c["cnt"] == len(keys) and c["xor"] == st:
            return "yes"
        if c["lo"] <= keys[0].hex() and c["hi"] >= keys[-1].hex():
            return "no"
        return "unknown"

    def snapshot(self, traffic=True):
        keys, state = self.goset()
        now = self.clock()
        neigh = self.neighbours.rows()
        for n in neigh:
            n["agree"] = self.agreement(n, keys, state)
        used, frames = self.airtime.used(now)
        out = {
            "now": now,
            "neighbours": neigh,
            "goset": {"count": len(keys), "state": state.hex(),
                      "keys": [k.hex() for k in keys]},
            "fronts": {fid: {s: f for s, (f, _) in per.items()}
                       for fid, per in self.fronts.items()},
            "airtime": {"used_ms": round(used, 1), "frames": frames,
                        "longest_ms": round(self.airtime.longest_ms, 1),
                        "waits": self.airtime.waits,
                        "window_ms": self.airtime.n * self.airtime.bucket_ms},
            "drops": dict(self.drops),
            "board": dict(self.board),
            "syncs": list(self.syncs),
        }
        if traffic:
            out["traffic"] = list(self.traffic)
        return out
