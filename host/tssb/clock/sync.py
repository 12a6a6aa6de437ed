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
                                peer's), then the Merkle descent: REQ the peer's root if
                                unknown, NODES answers, REQ children whose hash we do not
                                hold, down to LEAF nodes, which carry the event itself.
  ENDR(r)                   ->  sent when our descent has no open request; after both
                                ENDR(r), STATUS(r+1) re-checks.

A KEYED leaf for a key we do not replicate, or an event of such a key, is a false
positive of our filter at the peer: we answer NOTCOMMON(keys) and the peer drops them.
Every node received is checked against the hash we asked for, every event is validated
(signature, back references) before it is stored, and passed to the repo's `admit` hook
(ThreadRepo: counter threads are verified by counter.py; an offender's event ends the sync
with "rejected:<rule>", held messages stay out of the DAG).

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
  STATUS 3: varint r, clock, digest(32)                         EVENTS 4: varint c, blob*c
  REQ 5: varint c, hash(32)*c                                   NODES 6: varint c, node*c
  NOTCOMMON 7: varint c, blob*c     ENDR 8: varint r            ERROR 9: blob reason
  JHAVE 10: varint r, varint c, join id(20)*c                   JOINS 11: varint r, varint c, blob*c
  JEND 12: varint r
  node: tag(1) then INNER l(32) r(32) | FORK sub(32) | KEYED blob key, root(32) |
        LEAF blob event | 0xFF hash(32) (unknown to the sender)
"""
import os
import time

from tssb.clock import crypto
from tssb.clock import dag as D
from tssb.clock import forks
from tssb.clock.bloom import DEFAULT_K, DEFAULT_N, BloomClock, check_params
from tssb.clock.errors import ClockError
from tssb.clock.keyfilter import DEFAULT_FPR, SALT_LEN, KeyFilter
from tssb.clock.wire import Reader, varint

VERSION = 2                  # 2: join phase (JHAVE, JOINS, JEND) after convergence on forks
MODES = {"entity": 0, "feeds": 1, "threads": 2}
HELLO, FILTER, STATUS, EVENTS, REQ, NODES, NOTCOMMON, ENDR, ERROR, JHAVE, JOINS, JEND = range(1, 13)
N_UNKNOWN = 0xFF

# Limits (ours; chosen so one message stays well under the session layer's frame size
# and a peer cannot make us allocate without bound).
MAX_BATCH = 256              # hashes per REQ, nodes per NODES, events per EVENTS
MAX_EVENT_BYTES = 8192       # one event's wire form
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
    S_ROUND: {STATUS, EVENTS, REQ, NODES, NOTCOMMON, ENDR, ERROR},
    S_IDLE: {STATUS, EVENTS, REQ, NODES, NOTCOMMON, ENDR, ERROR},
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
                      "joins_sent": 0, "joins_recv": 0}

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
                   JHAVE: self._on_jhave, JOINS: self._on_joins, JEND: self._on_jend}[t]
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
        mine = self.my_status[rnd][0]
        peer_digest, peer_stamp = self.peer_status[rnd]
        if mine == peer_digest:
            return self._converged()
        self.unconverged += 1
        if self.unconverged > self.max_rounds:
            raise ClockError("rounds", self.unconverged)
        out = []
        # Proactive step: what the peer's stamp says it likely misses.
        batch = []
        for key in sorted(self.dags):
            for ev in self.dags[key].likely_missing(peer_stamp):
                batch.append(ev.raw)
        out += self._events_msgs(batch)
        # Reactive step: descend into the peer's tree where it differs from ours.
        out += self._want([peer_digest])
        return out + self._maybe_endr()

    def _events_msgs(self, raws):
        out = []
        for i in range(0, len(raws), MAX_BATCH):
            part = raws[i:i + MAX_BATCH]
            out.append(bytes([EVENTS]) + varint(len(part)) +
                       b"".join(varint(len(x)) + x for x in part))
        self.stats["events_sent"] += len(raws)
        return out

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
        if rnd in self.sent_endr:
            return self._next_round()
        return []

    # -- descent ----------------------------------------------------------------------

    def _want(self, hashes):
        need = [h for h in hashes if h not in self.known and h not in self.outstanding
                and h != D.EMPTY]
        if not need:
            return []
        if self.stats["nodes_recv"] + len(self.outstanding) + len(need) > MAX_SESSION_NODES:
            raise ClockError("too_many_nodes")
        self.outstanding.update(need)
        self.stats["trips"] += 1
        out = []
        for i in range(0, len(need), MAX_BATCH):
            part = need[i:i + MAX_BATCH]
            out.append(bytes([REQ]) + varint(len(part)) + b"".join(part))
        return out

    def _on_req(self, r):
        cnt = r.uint("req count", MAX_BATCH)
        hashes = [r.take(32, "hash") for _ in range(cnt)]
        r.end()
        parts = []
        for h in hashes:
            node = self.served.get(h)
            if node is None:
                parts.append(bytes([N_UNKNOWN]) + h)
                continue
            tag, data = node
            if tag == D.T_INNER:
                parts.append(bytes([tag]) + data[0] + data[1])
            elif tag == D.T_FORK:
                parts.append(bytes([tag]) + data)
            elif tag == D.T_KEYED:
                parts.append(bytes([tag]) + varint(len(data[0])) + data[0] + data[1])
            else:
                raw = self._event_raw(data)
                parts.append(bytes([tag]) + varint(len(raw)) + raw)
        self.stats["nodes_sent"] += len(parts)
        return [bytes([NODES]) + varint(len(parts)) + b"".join(parts)]

    def _event_raw(self, eid):
        for dag in self.dags.values():
            ev = dag.events.get(eid)
            if ev is not None:
                return ev.raw
        ev = self.pending.get(eid)
        if ev is not None:
            return ev.raw
        raise ClockError("lost_event")  # cannot happen: events are never removed

    def _on_nodes(self, r):
        cnt = r.uint("node count", MAX_BATCH)
        children = []
        out = []
        events = []
        for _ in range(cnt):
            tag = r.byte("node tag")
            if tag == D.T_INNER:
                l, rr = r.take(32, "l"), r.take(32, "r")
                h = D.h_inner(l, rr)
                children += [l, rr]
            elif tag == D.T_FORK:
                sub = r.take(32, "sub")
                h = D.h_fork(sub)
                children.append(sub)
            elif tag == D.T_KEYED:
                key = r.blob("key", MAX_KEY_LEN)
                root = r.take(32, "root")
                h = D.h_keyed(key, root)
                if key in self.dags:
                    children.append(root)
                elif key not in self.notcommon_sent:
                    self.notcommon_sent.add(key)
                    self.stats["false_positives"] += 1
                    out.append(bytes([NOTCOMMON]) + varint(1) + varint(len(key)) + key)
            elif tag == D.T_LEAF:
                raw = r.blob("event", MAX_EVENT_BYTES)
                ev = self.repo.parse(raw)
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
        out += self._want(children)
        return out + self._maybe_endr()

    # -- events -------------------------------------------------------------------------

    def _on_events(self, r):
        cnt = r.uint("event count", MAX_BATCH)
        raws = [r.blob("event", MAX_EVENT_BYTES) for _ in range(cnt)]
        r.end()
        out = []
        stray = []
        for raw in raws:
            ev = self.repo.parse(raw)
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

    def _accept(self, ev, final=False):
        """Insert a validated event (and any pending ones it unblocks). The repo's
        `admit` hook (ThreadRepo: counter rules) may first reject it ("rejected:<rule>"
        ends the sync), hold it aside, or make it wait; `final`: see _settle."""
        admit = getattr(self.repo, "admit", None)
        todo = [ev]
        while todo:
            ev = todo.pop()
            dag = self.dags.get(ev.key)
            if dag is None or ev.eid in dag:
                continue
            fate = admit(ev, final) if admit else "add"
            if fate == "held":      # kept aside by the repo: known here, never in the DAG
                self.pending.pop(ev.eid, None)
                self.known.add(D.h_leaf(ev.eid))
                continue
            if fate == "wait" or not dag.can_add(ev):
                if len(self.pending) >= MAX_PENDING:
                    raise ClockError("too_many_pending")
                self.pending[ev.eid] = ev
                continue
            self.pending.pop(ev.eid, None)
            dag.add(ev)
            if self.repo.save(ev):  # held messages moved into or out of the DAG
                dag = self.dags[ev.key] = self.repo.load(ev.key)
            self.new_events.append(ev)
            self.stats["events_recv"] += 1
            self.known.add(D.h_leaf(ev.eid))
            self._dirty = True
            if ev.seq is not None:
                self._check_fork(dag, ev)
            for p_eid, p in list(self.pending.items()):
                if p.key == ev.key and ev.eid in p.prevs:
                    del self.pending[p_eid]
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
                del self.pending[eid]
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
