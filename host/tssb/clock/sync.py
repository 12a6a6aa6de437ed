"""Sans-IO state machine of the Bloom-clock entity sync (spec protocols 1-4).

One `SyncMachine` per end of a channel; `start()` and `receive(msg)` return the messages
to send. Three modes share the machine:

  "entity"  protocols 1/2: one entity (a feed) named in HELLO.
  "feeds"   protocol 3: common feeds found through a Bloom filter of feed IDs.
  "threads" protocol 4: common threads found through a Bloom filter of thread roots.

In set modes the entity is the set of common entities, a fork at an empty root: its
stamp is the sum of their stamps (spec: "sum of the Bloom clock stamps") and its digest
the Merkle tree over KEYED(key, entity digest) sorted by key. Entity mode is the same
with one key, so one code path serves all.

Rounds (both ends symmetric, lock-step, r = 1, 2, ...):

  STATUS(r, stamp, digest)  ->  equal digests: converged (both ends compare the same
                                pair, so both know); idle until a side starts r+1.
                                else: proactive EVENTS (events whose stamp is not <= the
                                peer's), then the Merkle descent ("pull"): REQ the peer's
                                root, NODES answers, REQC names the children we do not
                                hold by their position in that NODES message, down to
                                LEAF nodes, which carry the event itself.
  ENDR(r)                   ->  sent when our descent has no open request; after both
                                ENDR(r), STATUS(r+1) re-checks.

Direction: in the first unconverged round after a convergence (or the start) a side pulls
only when the peer's stamp is not <= its own, i.e. the clocks say the peer holds events
we lack (spec step 2); the other side's events reach it by its own pull and by the
proactive step. A wrong skip (a Bloom false positive; a fork branch whose stamp the other
branch already covers, so stamps are equal and digests not) leaves the digests unequal at
the next STATUS, and from the second unconverged round on both sides always pull. Both
ends count unconverged rounds from the same digest pairs, so they agree on it; one side
pulling alone is fine for ENDR, which only waits for each side's own requests.

Events received before their references arrive wait in `pending`; their leaves count as
known, so the descent does not fetch them again (the leaf hash names the event by id:
fetching it again cannot help; what it waits for are other leaves, still fetched).

Side chains: a feed event is sent with the chunks of its side chain the sender holds (at
most events.MAX_EVENT_CHUNKS), checked hash by hash against the entry on arrival and
stored with it. Chunks do not enter the digest, so a peer holding an entry without (all)
its chunks is not completed here: the tinySSB replica's WANT/CHNK or SETU chunk elements
do that.

A KEYED leaf for a key we do not replicate, or an event of such a key, is a false
positive of our filter at the peer: we answer NOTCOMMON(keys) and the peer drops them.
Every node received is checked against the hash we asked for, every event is validated
(signature, back references, side-chain chunks) before it is stored, and passed to the
repo's `admit` hook (ThreadRepo: counter threads are verified by counter.py; an
offender's event ends the sync with "rejected:<rule>", held messages stay out of the DAG).

Forks (feed modes; spec: "resolve collaboratively a fork in a feed and inform the owner",
whose open issue leaves the join's content and propagation to us). Equal digests mean
both ends hold the same events of the common feeds, so both see the same forked feeds
(two entries at one seq). If there are none the sync ends as above. Otherwise, before
ending, each end
  1. stores a fork proof per forked seq (clock_forks) and, holding a signer, its own join
     for each forked feed (forks.make_join: tips in join order, digest, the proofs), unless
     its stored join already names this digest and these tips;
  2. sends JHAVE(r, ids of the joins it holds for the forked feeds, newest first);
  3. on the peer's JHAVE, sends JOINS(r, its joins the peer did not list, at most
     MAX_JOINS_MSG) -- always, maybe empty, so the peer knows what to expect;
  4. on the peer's JOINS: every join is checked (forks.parse_join: form, signature,
     proofs of that feed) and must name a feed in scope, else the sync fails with
     "join_<reason>" (ERROR to the peer) and none of that message is stored; valid ones
     are kept even when they disagree with our copy (a resolver that saw fewer branches
     is not lying; its proofs still convict the owner), flagged `agreed = 0`; their
     proofs are stored. Then it sends JEND(r);
  5. on the peer's JEND (our JOINS were accepted) the sync is converged. JEND makes a
     refusal of the last data message visible to its sender (ERROR instead of JEND).
Joins thus travel with the forked feed: a third peer (the owner) syncing that feed later
gets the proofs and every join, up to MAX_JOINS_MSG per sync and MAX_JOINS_PER_FEED
resolvers per feed (repo.py). Threads mode has no joins (thread forks are normal).

Message layout: one type byte, then fields (varint = unsigned LEB128, blob = varint
length + bytes):
  HELLO 1: version(1) mode(1) varint n, varint k [blob key]     FILTER 2: keyfilter
  STATUS 3: varint r, clock, digest(32)                         EVENTS 4: varint c, item*c
  REQ 5: varint c, hash(32)*c                                   NODES 6: varint c, node*c
  NOTCOMMON 7: varint c, blob*c     ENDR 8: varint r            ERROR 9: blob reason
  JHAVE 10: varint r, varint c, join id(20)*c                   JOINS 11: varint r, varint c, blob*c
  JEND 12: varint r
  REQC 13: varint ref, bitmap: ref numbers the peer's NODES messages of the session from
        0; bit i (byte i >> 3, bit i & 7) asks for the i-th child of that message's nodes in
        order (INNER: l, r; FORK: sub; KEYED: root; LEAF, unknown: none); ceil(children/8)
        bytes, unused bits 0. At most one REQC per NODES message, within the round.
  item: blob event, varint j, chunk(120)*j   (j <= events.MAX_EVENT_CHUNKS, feed events)
  node: tag(1) then INNER l(32) r(32) | FORK sub(32) | KEYED blob key, root(32) |
        LEAF item | 0xFF hash(32) (unknown to the sender)
EVENTS and NODES are split so a message stays under MAX_MSG_BYTES.
"""
import os
import time

from tssb.clock import crypto
from tssb.clock import dag as D
from tssb.clock import events as E
from tssb.clock import forks
from tssb.clock.bloom import DEFAULT_K, DEFAULT_N, BloomClock, check_params
from tssb.clock.errors import ClockError
from tssb.clock.keyfilter import DEFAULT_FPR, SALT_LEN, KeyFilter
from tssb.clock.wire import Reader, varint

# 2: join phase (JHAVE, JOINS, JEND) after convergence on forks; 3: REQC, chunks in event
# items, pull only towards a peer whose stamp is not <= ours in a first unconverged round.
VERSION = 3
MODES = {"entity": 0, "feeds": 1, "threads": 2}
(HELLO, FILTER, STATUS, EVENTS, REQ, NODES, NOTCOMMON, ENDR, ERROR, JHAVE, JOINS, JEND,
 REQC) = range(1, 14)
N_UNKNOWN = 0xFF

# Limits (ours; chosen so one message stays well under the session layer's frame size
# and a peer cannot make us allocate without bound).
MAX_BATCH = 256              # hashes per REQ, nodes per NODES, events per EVENTS
MAX_EVENT_BYTES = 8192       # one event's wire form
MAX_MSG_BYTES = 64 * 1024    # EVENTS/NODES are split above this (the mux allows 512 KiB)
MAX_PENDING_CHUNKS = 100000  # chunks carried by pending events (12 MB)
MAX_KEY_LEN = 64
MAX_ROUNDS = 16              # unconverged rounds before giving up
MAX_PENDING = 10000          # events held until their references arrive
MAX_SESSION_NODES = 1000000  # tree nodes fetched in one session
MAX_REASON = 200
MAX_JOINS_MSG = 16           # joins per JOINS message (<= 16 * 8 KiB), one per convergence

# States (h11 style: the allowed message types per state are a table).
S_HELLO, S_SCOPE, S_ROUND, S_IDLE, S_DONE, S_ERROR = "hello", "scope", "round", "idle", "done", "error"
S_JOINS = "joins"            # digests agree, forks in scope: exchanging joins
ALLOWED = {
    S_HELLO: {HELLO, ERROR},
    S_SCOPE: {FILTER, ERROR},
    S_ROUND: {STATUS, EVENTS, REQ, REQC, NODES, NOTCOMMON, ENDR, ERROR},
    S_IDLE: {STATUS, EVENTS, REQ, REQC, NODES, NOTCOMMON, ENDR, ERROR},
    S_JOINS: {JHAVE, JOINS, JEND, ERROR},
}


class SyncMachine:
    """One end of a clock sync.

    Args:
        repo: FeedRepo or ThreadRepo.
        mode: "entity", "feeds" or "threads".
        key: the entity (entity mode, initiator only; the responder takes it from HELLO).
        n, k: Bloom clock parameters (both ends must agree).
        fpr: target false-positive rate of the key filter.
        salt: filter salt (random when None; tests fix it to force false positives).
        filter_bits: fixed filter size in bits (None: sized from fpr).
        signer: 32-byte Ed25519 seed that signs our joins of forked feeds (the host
            identity); None: we only pass on the joins of others.
        now_ms: clock for join timestamps (default wall clock, ms).
    """

    def __init__(self, repo, mode="feeds", key=None, n=DEFAULT_N, k=DEFAULT_K,
                 fpr=DEFAULT_FPR, salt=None, filter_bits=None, max_rounds=MAX_ROUNDS,
                 signer=None, now_ms=None):
        if mode not in MODES:
            raise ValueError("mode")
        check_params(n, k)
        self.repo = repo
        self.mode = mode
        self.key = key
        self.n = n
        self.k = k
        self.fpr = fpr
        self.salt = salt if salt is not None else os.urandom(SALT_LEN)
        self.filter_bits = filter_bits
        self.max_rounds = max_rounds
        self.state = S_HELLO
        self.reason = None
        self.peer_reason = None
        self.dags = {}
        self.round = 0
        self.unconverged = 0
        self.my_status = {}
        self.peer_status = {}
        self.sent_endr = set()
        self.peer_endr = set()
        self.compared = set()
        self.known = set()       # node hashes of any tree of ours (we hold their subtrees)
        self.served = {}         # node hash -> (tag, data) we can answer REQs for
        self.outstanding = set()
        self.pending = {}        # eid -> event waiting for its references
        self.pending_chunks = 0  # chunks those events carry
        self.nodes_in = 0        # NODES messages received (REQC names them by number)
        self.nodes_out = 0       # NODES messages sent
        self.sent_children = {}  # our NODES number -> its children, until REQC or ENDR
        self.served_round = 0    # nodes served since the peer's last ENDR
        self.notcommon_sent = set()
        self._dirty = True
        self._snap = None
        self._seqs = {}
        self.forks_found = []
        self.new_events = []
        self.signer = signer
        self.resolver = crypto.publickey(signer) if signer is not None else None
        self.now_ms = now_ms or (lambda: int(time.time() * 1000))
        self.peer_have = None    # join ids the peer listed in this join phase
        self.peer_joins = False  # the peer's JOINS of this phase processed
        self.joins_made = []     # our own joins made in this session (raw)
        self.joins_received = []  # (Join, agreed, repo outcome) per join received
        self.stats = {"rounds": 0, "trips": 0, "events_sent": 0, "events_recv": 0,
                      "nodes_sent": 0, "nodes_recv": 0, "false_positives": 0,
                      "joins_sent": 0, "joins_recv": 0, "pulls": 0, "pulls_skipped": 0,
                      "pended": 0, "events_dup": 0, "chunks_sent": 0, "chunks_recv": 0}

    # -- public API ---------------------------------------------------------------------

    @property
    def converged(self):
        return self.state == S_IDLE

    def start(self):
        """First messages: HELLO (+ FILTER in set modes)."""
        hello = bytes([HELLO, VERSION, MODES[self.mode]]) + varint(self.n) + varint(self.k)
        if self.mode == "entity":
            if self.key is None:
                raise ValueError("entity mode needs a key")
            hello += varint(len(self.key)) + self.key
            if hasattr(self.repo, "store") and not self.repo.has(self.key):
                self.repo.store.add_feed(self.key)   # we ask for this feed: replicate it
        out = [hello]
        if self.mode != "entity":
            mine = self.repo.keys()
            if self.filter_bits:
                f = KeyFilter(self.filter_bits, 1, self.salt)
            else:
                f = KeyFilter.sized(len(mine), self.salt, self.fpr)
            for key in mine:
                f.add(key)
            out.append(bytes([FILTER]) + f.encode())
        return out

    def receive(self, msg):
        """Process one message from the peer.

        Returns:
            list of messages to send.
        Raises:
            ClockError: the peer broke the protocol (state is then S_ERROR); the caller
                sends `error_message()` and closes.
        """
        if self.state in (S_DONE, S_ERROR):
            raise ClockError("closed")
        try:
            return self._receive(msg)
        except ClockError as e:
            self.state = S_ERROR
            self.reason = e.reason
            raise

    def error_message(self):
        reason = (self.reason or "error").encode()[:MAX_REASON]
        return bytes([ERROR]) + varint(len(reason)) + reason

    def update(self):
        """Local events arrived (maintenance, spec step 6): start the next round when idle.

        Returns:
            messages to send.
        """
        if self.state != S_IDLE:
            return []
        for dag_key in list(self.dags):
            self.dags[dag_key] = self.repo.load(dag_key)
        self._dirty = True
        return self._next_round()

    # -- dispatch ---------------------------------------------------------------------

    def _receive(self, msg):
        if not msg:
            raise ClockError("empty")
        t = msg[0]
        if t not in ALLOWED.get(self.state, ()):
            raise ClockError("unexpected", (self.state, t))
        r = Reader(msg[1:])
        handler = {HELLO: self._on_hello, FILTER: self._on_filter, STATUS: self._on_status,
                   EVENTS: self._on_events, REQ: self._on_req, NODES: self._on_nodes,
                   NOTCOMMON: self._on_notcommon, ENDR: self._on_endr, ERROR: self._on_error,
                   JHAVE: self._on_jhave, JOINS: self._on_joins, JEND: self._on_jend,
                   REQC: self._on_reqc}[t]
        out = handler(r)
        return out

    def _on_error(self, r):
        reason = r.blob("reason", MAX_REASON).decode("utf-8", "replace")
        self.peer_reason = reason     # e.g. "rejected:not_selected": why the peer stopped
        raise ClockError("peer_error", reason)

    def _on_hello(self, r):
        ver = r.byte("version")
        mode = r.byte("mode")
        n = r.uint("n")
        k = r.uint("k")
        if ver != VERSION or mode != MODES[self.mode] or n != self.n or k != self.k:
            raise ClockError("hello_mismatch", (ver, mode, n, k))
        if self.mode == "entity":
            key = r.blob("key", MAX_KEY_LEN)
            r.end()
            if self.key is not None and key != self.key:
                raise ClockError("entity_mismatch")
            self.key = key
            if hasattr(self.repo, "store") and not self.repo.has(key):
                self.repo.store.add_feed(key)   # asked to sync this feed: replicate it
            self._set_scope([key])
            return self._next_round()
        r.end()
        self.state = S_SCOPE
        return []

    def _on_filter(self, r):
        f = KeyFilter.read(r)
        r.end()
        self._set_scope([key for key in self.repo.keys() if key in f])
        return self._next_round()

    def _set_scope(self, keys):
        self.dags = {bytes(key): self.repo.load(bytes(key)) for key in keys}
        self._dirty = True

    # -- snapshots --------------------------------------------------------------------

    def _snapshot(self):
        """(set root, summed stamp) of the current scope; registers all tree nodes."""
        if self._dirty or self._snap is None:
            leaves = []
            stamp = BloomClock(self.n, self.k)
            for key in sorted(self.dags):
                dag = self.dags[key]
                root, nodes = dag.tree()
                self.served.update(nodes)
                self.known.update(nodes)
                h = D.h_keyed(key, root)
                self.served[h] = (D.T_KEYED, (key, root))
                self.known.add(h)
                leaves.append(h)
                stamp = stamp.add(dag.stamp())
            inner = {}
            root = D.mth(leaves, inner)
            self.served.update(inner)
            self.known.update(inner)
            self.known.add(root)
            self._snap = (root, stamp)
            self._dirty = False
        return self._snap

    def digest(self):
        return self._snapshot()[0]

    # -- rounds -----------------------------------------------------------------------

    def _next_round(self):
        self.round += 1
        self.state = S_ROUND
        root, stamp = self._snapshot()
        self.my_status[self.round] = (root, stamp)
        out = [bytes([STATUS]) + varint(self.round) + stamp.encode() + root]
        return out + self._maybe_compare()

    def _on_status(self, r):
        rnd = r.uint("round")
        stamp = BloomClock.read(r, self.k, self.n)
        digest = r.take(32, "digest")
        r.end()
        out = []
        if rnd == self.round + 1 and self.state == S_IDLE:
            out += self._next_round_no_compare()
        elif rnd != self.round or rnd in self.peer_status:
            raise ClockError("round", rnd)
        self.peer_status[rnd] = (digest, stamp)
        return out + self._maybe_compare()

    def _next_round_no_compare(self):
        self.round += 1
        self.state = S_ROUND
        root, stamp = self._snapshot()
        self.my_status[self.round] = (root, stamp)
        return [bytes([STATUS]) + varint(self.round) + stamp.encode() + root]

    def _maybe_compare(self):
        rnd = self.round
        if rnd in self.compared or rnd not in self.peer_status or rnd not in self.my_status:
            return []
        self.compared.add(rnd)
        self.stats["rounds"] += 1
        mine, my_stamp = self.my_status[rnd]
        peer_digest, peer_stamp = self.peer_status[rnd]
        if mine == peer_digest:
            return self._converged()
        self.unconverged += 1
        if self.unconverged > self.max_rounds:
            raise ClockError("rounds", self.unconverged)
        # Proactive step: what the peer's stamp says it likely misses.
        batch = []
        for key in sorted(self.dags):
            batch += self.dags[key].likely_missing(peer_stamp)
        out = self._events_msgs(batch)
        # Reactive step: descend into the peer's tree where it differs from ours; in a
        # first unconverged round only if the clocks say it holds events we lack (see the
        # module docstring: the next STATUS catches a wrong skip).
        if self.unconverged > 1 or not peer_stamp <= my_stamp:
            self.stats["pulls"] += 1
            out += self._want([peer_digest])
        else:
            self.stats["pulls_skipped"] += 1
        return out + self._maybe_endr()

    def _item(self, ev):
        """Wire form of an event: blob event, varint j, its side-chain chunks."""
        chunks = self.repo.chunks(ev)
        self.stats["chunks_sent"] += len(chunks)
        return varint(len(ev.raw)) + ev.raw + varint(len(chunks)) + b"".join(chunks)

    def _read_item(self, r):
        """Parse and validate one event item (event, then its chunks against the entry)."""
        raw = r.blob("event", MAX_EVENT_BYTES)
        j = r.uint("chunk count")
        if j > E.MAX_EVENT_CHUNKS:   # before reading them: no allocation on the peer's word
            raise ClockError("too_many_chunks", j)
        chunks = [r.take(E.CHUNK_LEN, "chunk") for _ in range(j)]
        return self.repo.parse(raw, chunks)

    def _split(self, typ, parts):
        """Messages `typ, varint c, part*c`, at most MAX_BATCH parts and about
        MAX_MSG_BYTES each; returns (messages, parts per message)."""
        msgs, sizes = [], []
        i = 0
        while i < len(parts):
            j, size = i, 0
            while j < len(parts) and j - i < MAX_BATCH and \
                    (j == i or size + len(parts[j]) <= MAX_MSG_BYTES):
                size += len(parts[j])
                j += 1
            msgs.append(bytes([typ]) + varint(j - i) + b"".join(parts[i:j]))
            sizes.append(j - i)
            i = j
        return msgs, sizes

    def _events_msgs(self, evs):
        self.stats["events_sent"] += len(evs)
        return self._split(EVENTS, [self._item(ev) for ev in evs])[0]

    def _maybe_endr(self):
        rnd = self.round
        if self.state != S_ROUND or rnd not in self.compared or self.outstanding or rnd in self.sent_endr:
            return []
        self._settle()
        self.sent_endr.add(rnd)
        out = [bytes([ENDR]) + varint(rnd)]
        if rnd in self.peer_endr:
            out += self._next_round()
        return out

    def _on_endr(self, r):
        rnd = r.uint("round")
        r.end()
        if rnd != self.round or rnd in self.peer_endr:
            raise ClockError("round", rnd)
        self.peer_endr.add(rnd)
        # The peer's descent of this round is over: it names no more of our NODES.
        self.sent_children.clear()
        self.served_round = 0
        if rnd in self.sent_endr:
            return self._next_round()
        return []

    # -- descent ----------------------------------------------------------------------

    def _check_budget(self, count):
        if self.stats["nodes_recv"] + len(self.outstanding) + count > MAX_SESSION_NODES:
            raise ClockError("too_many_nodes")

    def _want(self, hashes):
        """REQ by hash (the peer's root)."""
        need = [h for h in hashes if h not in self.known and h not in self.outstanding
                and h != D.EMPTY]
        if not need:
            return []
        self._check_budget(len(need))
        self.outstanding.update(need)
        self.stats["trips"] += 1
        out = []
        for i in range(0, len(need), MAX_BATCH):
            part = need[i:i + MAX_BATCH]
            out.append(bytes([REQ]) + varint(len(part)) + b"".join(part))
        return out

    def _want_children(self, ref, children, eligible):
        """REQC for the children of the peer's NODES message `ref` that we lack."""
        bits = bytearray((len(children) + 7) // 8)
        need = set()
        for i, h in enumerate(children):
            if eligible[i] and h not in self.known and h not in self.outstanding \
                    and h not in need and h != D.EMPTY:
                bits[i >> 3] |= 1 << (i & 7)
                need.add(h)
        if not need:
            return []
        self._check_budget(len(need))
        self.outstanding.update(need)
        self.stats["trips"] += 1
        return [bytes([REQC]) + varint(ref) + bytes(bits)]

    def _on_req(self, r):
        cnt = r.uint("req count", MAX_BATCH)
        hashes = [r.take(32, "hash") for _ in range(cnt)]
        r.end()
        return self._serve(hashes)

    def _on_reqc(self, r):
        ref = r.uint("ref")
        children = self.sent_children.pop(ref, None)
        if children is None:   # never sent, already asked for, or from an ended round
            raise ClockError("req_ref", ref)
        bits = r.take((len(children) + 7) // 8, "bitmap")
        r.end()
        if len(children) % 8 and bits[-1] >> (len(children) % 8):
            raise ClockError("req_bits")
        hashes = [h for i, h in enumerate(children) if bits[i >> 3] >> (i & 7) & 1]
        if not hashes:
            raise ClockError("req_empty")
        return self._serve(hashes)

    def _serve(self, hashes):
        """NODES answering a REQ or REQC; records each message's children for REQC."""
        self.served_round += len(hashes)
        if self.served_round > MAX_SESSION_NODES:   # bounds sent_children too
            raise ClockError("too_many_reqs")
        parts, kids = [], []
        for h in hashes:
            node = self.served.get(h)
            if node is None:
                parts.append(bytes([N_UNKNOWN]) + h)
                kids.append(())
                continue
            tag, data = node
            if tag == D.T_INNER:
                parts.append(bytes([tag]) + data[0] + data[1])
                kids.append(data)
            elif tag == D.T_FORK:
                parts.append(bytes([tag]) + data)
                kids.append((data,))
            elif tag == D.T_KEYED:
                parts.append(bytes([tag]) + varint(len(data[0])) + data[0] + data[1])
                kids.append((data[1],))
            else:
                parts.append(bytes([tag]) + self._item(self._event(data)))
                kids.append(())
        self.stats["nodes_sent"] += len(parts)
        msgs, sizes = self._split(NODES, parts)
        i = 0
        for size in sizes:
            children = [c for k in kids[i:i + size] for c in k]
            if children:
                self.sent_children[self.nodes_out] = children
            self.nodes_out += 1
            i += size
        return msgs

    def _event(self, eid):
        for dag in self.dags.values():
            ev = dag.events.get(eid)
            if ev is not None:
                return ev
        ev = self.pending.get(eid)
        if ev is not None:
            return ev
        raise ClockError("lost_event")  # cannot happen: events are never removed

    def _on_nodes(self, r):
        cnt = r.uint("node count", MAX_BATCH)
        ref = self.nodes_in
        self.nodes_in += 1
        children = []    # in node order, as the peer numbers them for REQC
        eligible = []
        out = []
        events = []
        for _ in range(cnt):
            tag = r.byte("node tag")
            if tag == D.T_INNER:
                l, rr = r.take(32, "l"), r.take(32, "r")
                h = D.h_inner(l, rr)
                children += [l, rr]
                eligible += [True, True]
            elif tag == D.T_FORK:
                sub = r.take(32, "sub")
                h = D.h_fork(sub)
                children.append(sub)
                eligible.append(True)
            elif tag == D.T_KEYED:
                key = r.blob("key", MAX_KEY_LEN)
                root = r.take(32, "root")
                h = D.h_keyed(key, root)
                children.append(root)
                eligible.append(key in self.dags)
                if key not in self.dags and key not in self.notcommon_sent:
                    self.notcommon_sent.add(key)
                    self.stats["false_positives"] += 1
                    out.append(bytes([NOTCOMMON]) + varint(1) + varint(len(key)) + key)
            elif tag == D.T_LEAF:
                ev = self._read_item(r)
                h = D.h_leaf(ev.eid)
                events.append(ev)
            elif tag == N_UNKNOWN:
                h = r.take(32, "hash")
            else:
                raise ClockError("node_tag", tag)
            if h not in self.outstanding:
                raise ClockError("unrequested_node")
            self.outstanding.discard(h)
            self.stats["nodes_recv"] += 1
        r.end()
        for ev in events:
            out += self._accept(ev)
        out += self._want_children(ref, children, eligible)
        return out + self._maybe_endr()

    # -- events -------------------------------------------------------------------------

    def _on_events(self, r):
        cnt = r.uint("event count", MAX_BATCH)
        evs = [self._read_item(r) for _ in range(cnt)]   # all checked before any is stored
        r.end()
        out = []
        stray = []
        for ev in evs:
            if ev.key not in self.dags:
                if self.mode == "entity":
                    raise ClockError("entity")
                if ev.key not in self.notcommon_sent:
                    self.notcommon_sent.add(ev.key)
                    self.stats["false_positives"] += 1
                    stray.append(ev.key)
                continue
            out += self._accept(ev)
        if stray:
            out.insert(0, bytes([NOTCOMMON]) + varint(len(stray)) +
                       b"".join(varint(len(x)) + x for x in stray))
        return out

    def _on_notcommon(self, r):
        cnt = r.uint("key count", MAX_BATCH)
        keys = [r.blob("key", MAX_KEY_LEN) for _ in range(cnt)]
        r.end()
        if self.mode == "entity":
            raise ClockError("notcommon_in_entity_mode")
        for key in keys:
            if self.dags.pop(key, None) is not None:
                self._dirty = True
        return []

    def _pend(self, ev):
        if ev.eid in self.pending:
            return
        if len(self.pending) >= MAX_PENDING or \
                self.pending_chunks + len(ev.chunks) > MAX_PENDING_CHUNKS:
            raise ClockError("too_many_pending")
        self.pending[ev.eid] = ev
        self.pending_chunks += len(ev.chunks)
        self.stats["pended"] += 1
        self.known.add(D.h_leaf(ev.eid))   # held here: the descent need not fetch it again

    def _unpend(self, eid):
        ev = self.pending.pop(eid, None)
        if ev is not None:
            self.pending_chunks -= len(ev.chunks)
        return ev

    def _accept(self, ev, final=False):
        """Insert a validated event (and any pending ones it unblocks). The repo's
        `admit` hook (ThreadRepo: counter rules) may first reject it ("rejected:<rule>"
        ends the sync), hold it aside, or make it wait; `final`: see _settle."""
        admit = getattr(self.repo, "admit", None)
        dag = self.dags.get(ev.key)
        if dag is not None and (ev.eid in dag or ev.eid in self.pending):
            self.stats["events_dup"] += 1   # sent twice (proactively and as a leaf)
        todo = [ev]
        while todo:
            ev = todo.pop()
            dag = self.dags.get(ev.key)
            if dag is None or ev.eid in dag:
                continue
            fate = admit(ev, final) if admit else "add"
            if fate == "held":      # kept aside by the repo: known here, never in the DAG
                self._unpend(ev.eid)
                self.known.add(D.h_leaf(ev.eid))
                continue
            if fate == "wait" or not dag.can_add(ev):
                self._pend(ev)
                continue
            self._unpend(ev.eid)
            dag.add(ev)
            if self.repo.save(ev):  # held messages moved into or out of the DAG
                dag = self.dags[ev.key] = self.repo.load(ev.key)
            self.stats["chunks_recv"] += self.repo.save_chunks(ev)
            ev.chunks = ()          # stored (or, for a fork entry, not kept): the DAG holds
                                    # events for the whole session, chunks come from the store
            self.new_events.append(ev)
            self.stats["events_recv"] += 1
            self.known.add(D.h_leaf(ev.eid))
            self._dirty = True
            if ev.seq is not None:
                self._check_fork(dag, ev)
            for p_eid, p in list(self.pending.items()):
                if p.key == ev.key and ev.eid in p.prevs:
                    self._unpend(p_eid)
                    todo.append(p)
        return []

    def _settle(self):
        """Our descent of this round is done, so everything the peer holds has arrived:
        a pending event with all references present waits for nothing and gets the
        repo's final verdict now (e.g. an increment whose author never joined is
        rejected at once instead of after MAX_ROUNDS unconverged rounds)."""
        for eid in sorted(self.pending):
            ev = self.pending.get(eid)
            if ev is not None and ev.key in self.dags and self.dags[ev.key].can_add(ev):
                self._unpend(eid)
                self._accept(ev, final=True)

    def _check_fork(self, dag, ev):
        seqs = self._seqs.get(dag.key)
        if seqs is None:
            seqs = {}
            for x in dag.events.values():
                if x.eid != ev.eid:
                    seqs.setdefault(x.seq, x)
            self._seqs[dag.key] = seqs
        other = seqs.get(ev.seq)
        if other is None:
            seqs[ev.seq] = ev
        elif other.eid != ev.eid:
            proof = forks.make_proof(other.raw, ev.raw)
            self.forks_found.append(proof)
            if hasattr(self.repo, "record_fork"):
                self.repo.record_fork(dag.key, ev.seq, proof)

    # -- joins: inform the peer (and through it others and the owner) of forks ---------

    def _forked(self):
        """Keys in scope whose DAG has two events at one seq (feeds: a FeedRepo, whose
        events carry seqs; threads have no seqs and no joins)."""
        if self.mode == "threads" or not hasattr(self.repo, "store_join"):
            return []
        out = []
        for key in sorted(self.dags):
            seqs = [e.seq for e in self.dags[key].events.values() if e.seq is not None]
            if len(set(seqs)) != len(seqs):
                out.append(key)
        return out

    def _converged(self):
        self.unconverged = 0
        forked = self._forked()
        if not forked:
            self.state = S_IDLE
            return []
        self.state = S_JOINS
        self.peer_have = None
        self.peer_joins = False
        for key in forked:
            dag = self.dags[key]
            for proof in forks.find_forks(dag):
                self.repo.record_fork(key, int.from_bytes(proof[32:36], "big"), proof)
            self._own_join(dag)
        ids = [jid for jid, _ in self._join_offer(forked)][:MAX_BATCH]
        return [bytes([JHAVE]) + varint(self.round) + varint(len(ids)) + b"".join(ids)]

    def _own_join(self, dag):
        """Sign and store our join of a forked feed unless the stored one still fits."""
        if self.signer is None:
            return
        ts = self.now_ms()
        old = self.repo.join_of(dag.key, self.resolver)
        if old is not None:
            j = forks.parse_join(old)
            if forks.check_join(j, dag):
                return
            ts = max(ts, j.ts + 1)   # store_join keeps the newest per resolver
        raw = forks.make_join(self.signer, dag, ts)
        self.repo.store_join(forks.parse_join(raw), True, own=True)
        self.joins_made.append(raw)

    def _join_offer(self, forked):
        """(id, raw) of the joins we hold for the forked feeds, newest first per feed."""
        out = []
        for key in forked:
            out += [(row[2], row[5]) for row in self.repo.joins(key)]
        return out

    def _on_jhave(self, r):
        rnd = r.uint("round")
        cnt = r.uint("join id count", MAX_BATCH)
        ids = {r.take(forks.JOIN_ID_LEN, "join id") for _ in range(cnt)}
        r.end()
        if rnd != self.round or self.peer_have is not None:
            raise ClockError("round", rnd)
        self.peer_have = ids
        send = [raw for jid, raw in self._join_offer(self._forked()) if jid not in ids]
        send = send[:MAX_JOINS_MSG]
        self.stats["joins_sent"] += len(send)
        return [bytes([JOINS]) + varint(rnd) + varint(len(send)) +
                b"".join(varint(len(x)) + x for x in send)]

    def _on_joins(self, r):
        rnd = r.uint("round")
        cnt = r.uint("join count", MAX_JOINS_MSG)
        raws = [r.blob("join", forks.MAX_JOIN_BYTES) for _ in range(cnt)]
        r.end()
        if rnd != self.round or self.peer_have is None or self.peer_joins:
            raise ClockError("round", rnd)   # JOINS answers our JHAVE, after the peer's
        joins = []
        for raw in raws:   # all checked before any is stored
            try:
                j = forks.parse_join(raw)
            except ClockError as e:   # "join_tag" stays, "signature" -> "join_signature"
                reason = e.reason if e.reason.startswith("join") else "join_" + e.reason
                raise ClockError(reason, e.detail)
            if j.fid not in self.dags:
                raise ClockError("join_feed", j.fid.hex()[:16])
            joins.append(j)
        for j in joins:
            agreed = forks.check_join(j, self.dags[j.fid])
            for proof in j.proofs:
                self.repo.record_fork(j.fid, int.from_bytes(proof[32:36], "big"), proof)
            outcome = self.repo.store_join(j, agreed)
            self.joins_received.append((j, agreed, outcome))
            if outcome in ("stored", "replaced"):
                self.stats["joins_recv"] += 1
        self.peer_joins = True
        return [bytes([JEND]) + varint(rnd)]

    def _on_jend(self, r):
        rnd = r.uint("round")
        r.end()
        if rnd != self.round or not self.peer_joins:
            raise ClockError("round", rnd)   # the peer's JEND follows its JOINS
        self.state = S_IDLE
        return []
