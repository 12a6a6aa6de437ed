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

  STATUS(r, ack, stamp, digest)
      equal digests: converged (both ends compare the same pair, so both know); idle
      until a side starts r+1. Else: proactive EVENTS (events whose stamp is not <= the
      peer's), then the Merkle descent ("pull"): the pulled side sends its root unasked
      (NODES), the puller names the children it lacks with REQC (by position in that
      NODES message), down to LEAF nodes, which carry the event itself.
  ENDR(r)
      sent when our descent has no open request; after both ENDR(r), STATUS(r+1)
      re-checks. The side whose descent ends last sends STATUS(r+1) in place of its
      ENDR(r) (a STATUS of the next round stands for the ENDR of this one).

Direction: in the first unconverged round after a convergence (or the start) a side pulls
only when the peer's stamp is not <= its own, i.e. the clocks say the peer holds events
we lack (spec step 2); the other side's events reach it by its own pull and by the
proactive step. A wrong skip (a Bloom false positive; a fork branch whose stamp the other
branch already covers, so stamps are equal and digests not) leaves the digests unequal at
the next STATUS, and from the second unconverged round on both sides always pull. Both
ends count unconverged rounds from the same digest pairs, so they agree on it; one side
pulling alone is fine for ENDR, which only waits for each side's own requests. Each end
applies this rule for both sides (it knows both stamps): the side to be pulled sends its
root with its compare, so no request for it exists.

Nested answers: a node in NODES may carry its children as nodes instead of hashes (tag
bits X_FIRST, X_SECOND), to any depth up to MAX_NEST, so one answer covers several tree
levels. The receiver checks the answer's root against what it asked for (the nested hashes
are recomputed into it) and its REQC names only the open children (those sent as hashes).
What to nest is the sender's choice (`_expand`: likely differing nodes from the stamp
distance, the right spines of entity trees, and the newest event of a spine when the
peer's stamp is below ours); an answer is cut at one message's size.

Concluding a round without the last STATUS: STATUS carries `ack`, the number of the
peer's data messages (EVENTS, NOTCOMMON, NODES holding a LEAF) received when it was sent;
its digest reflects all of them (pending events are settled before each STATUS). The
peer's events and scope change only through our data during a round (local events enter
only in a round started from idle, `update`). So at the end of an unconverged round,
when the peer's last STATUS acks all our data messages and shows the digest our new
STATUS(r+1) carries, the peer holds what we hold: we are converged on sending it. The
peer evaluates the same condition on receipt (our data messages it received against the
ack of its last STATUS, our digest against its last STATUS's) and agrees without a reply.
A STATUS of the peer that crossed our conclusion must show our digest ("status_conflict"
otherwise). Rounds started from idle always exchange both STATUS. Entity mode: the
initiator sends STATUS(1) with HELLO (the entity is known), saving a round trip.

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
  STATUS 3: varint r, varint ack, clock, digest(32)             EVENTS 4: varint c, item*c
  (5 unused: REQ by hash up to VERSION 3)                       NODES 6: varint c, node*c
  NOTCOMMON 7: varint c, blob*c     ENDR 8: varint r            ERROR 9: blob reason
  JHAVE 10: varint r, varint c, join id(20)*c                   JOINS 11: varint r, varint c, blob*c
  JEND 12: varint r
  REQC 13: varint ref, bitmap: ref numbers the peer's NODES messages of the session from
        0; bit i (byte i >> 3, bit i & 7) asks for the i-th open child of that message
        (children sent as hashes, in the order they appear); ceil(open/8) bytes, unused
        bits 0. At most one REQC per NODES message, within the round.
  item: blob event, varint j, chunk(120)*j   (j <= events.MAX_EVENT_CHUNKS, feed events)
  node: tag(1) then INNER child l, child r | FORK child sub | KEYED blob key, child root |
        LEAF item | 0xFF hash(32) (unknown to the sender; top level only)
        tag = D.T_* | X_FIRST (0x10: the first child is a node) | X_SECOND (0x20: the
        second is, INNER only); child = node if its bit is set, else hash(32).
        NODES: c <= MAX_BATCH answers, <= MAX_NODES_MSG nodes in all, nesting <= MAX_NEST.
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
# items, pull only towards a peer whose stamp is not <= ours in a first unconverged round;
# 4: the pulled side sends its root unasked (no REQ), answers nest several tree levels,
# STATUS carries an ack and may conclude a round or stand for ENDR, entity-mode STATUS
# goes out with HELLO.
VERSION = 4
MODES = {"entity": 0, "feeds": 1, "threads": 2}
HELLO, FILTER, STATUS, EVENTS = range(1, 5)           # 5 was REQ (by hash) up to VERSION 3
NODES, NOTCOMMON, ENDR, ERROR, JHAVE, JOINS, JEND, REQC = range(6, 14)
N_UNKNOWN = 0xFF
X_FIRST, X_SECOND = 0x10, 0x20   # node tag bits: that child follows as a node, not a hash

# Limits (ours; chosen so one message stays well under the session layer's frame size
# and a peer cannot make us allocate without bound).
MAX_BATCH = 256              # answers per NODES, events per EVENTS, ids per JHAVE
MAX_EVENT_BYTES = 8192       # one event's wire form
MAX_MSG_BYTES = 64 * 1024    # EVENTS/NODES are split above this (the mux allows 512 KiB)
MAX_PENDING_CHUNKS = 100000  # chunks carried by pending events (12 MB)
MAX_KEY_LEN = 64
MAX_ROUNDS = 16              # unconverged rounds before giving up
MAX_PENDING = 10000          # events held until their references arrive
MAX_SESSION_NODES = 1000000  # tree nodes fetched in one session
MAX_REASON = 200
MAX_JOINS_MSG = 16           # joins per JOINS message (<= 16 * 8 KiB), one per convergence
MAX_NEST = 64                # nesting depth of one answer (tree levels below the request)
MAX_ANSWER_BYTES = MAX_MSG_BYTES - 64   # one answer with its nested nodes fits a message
MAX_EXPAND = 1024            # nodes per answer (nested ones included)
MAX_NODES_MSG = 2048         # nodes per NODES message we accept, nested ones included

# Expansion policy of an answer (ours; the receiver accepts any nesting within the limits,
# see _expand). Nesting a child costs its tag and 32 B per grandchild instead of its 32-byte
# hash; when the requester lacks the child it saves a round trip and the later answer.
EXPAND_DEPTH = 2             # set tree: the requested node and its children always
EXPAND_P = 0.25              # set tree: deeper INNER nodes when P(differs | request does) >= this
EXPAND_P_KEYED = 0.75        # set tree: KEYED leaves (they bring their entity's spine) likewise
TAIL_MARGIN = 1.5            # entity tree: nest nodes over the newest 1.5 x (estimated missing)

# States (h11 style: the allowed message types per state are a table).
S_HELLO, S_SCOPE, S_ROUND, S_IDLE, S_DONE, S_ERROR = "hello", "scope", "round", "idle", "done", "error"
S_JOINS = "joins"            # digests agree, forks in scope: exchanging joins
ALLOWED = {
    S_HELLO: {HELLO, ERROR},
    S_SCOPE: {FILTER, ERROR},
    S_ROUND: {STATUS, EVENTS, REQC, NODES, NOTCOMMON, ENDR, ERROR},
    S_IDLE: {STATUS, EVENTS, REQC, NODES, NOTCOMMON, ENDR, ERROR},
    S_JOINS: {STATUS, JHAVE, JOINS, JEND, ERROR},   # STATUS: one crossing our conclusion
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
        self.outstanding = set()  # hashes we asked for (or expect: the peer's root)
        self.pending = {}        # eid -> event waiting for its references
        self.pending_chunks = 0  # chunks those events carry
        # tssb.session.budget.Budget or None: each pending event is charged to
        # "unverified", one unit for it and one per chunk it carries (release(): at the end)
        self.budget = None
        self.nodes_in = 0        # NODES messages received (REQC names them by number)
        self.nodes_out = 0       # NODES messages sent
        self.sent_children = {}  # our NODES number -> its children, until REQC or ENDR
        self.served_round = 0    # nodes served since the peer's last ENDR
        self.notcommon_sent = set()
        self.data_out = 0        # our messages that can change the peer's events or scope
        self.data_in = 0         # such messages from the peer (EVENTS, NOTCOMMON, NODES
                                 # with a LEAF): STATUS acks them
        self.peer_view = None    # (digest, ack) of the peer's last STATUS
        self.my_view = None      # (digest, ack) of our last STATUS
        self.diff_est = 1.0      # events the peer likely lacks (stamps), for _expand
        self.behind = False      # the peer's stamp is below ours (this round), for _expand
        self.proactive = set()   # ids of the events we sent proactively this round
        self._set_nodes = set()  # INNER nodes of our set trees (over KEYED leaves)
        self._sizes = {}         # node hash -> items under it (_size)
        self._tail = {}          # entity-tree node hash -> items after it (_mark_tail)
        self.tail_est = 1        # newest items a differing entity of the peer likely lacks
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
                      "pended": 0, "events_dup": 0, "chunks_sent": 0, "chunks_recv": 0,
                      "concluded": 0}

    # -- public API ---------------------------------------------------------------------

    @property
    def converged(self):
        return self.state == S_IDLE

    def start(self):
        """First messages: HELLO, then FILTER (set modes) or, in entity mode when we
        initiate, STATUS: the entity is known, so round 1 need not wait for the peer."""
        hello = bytes([HELLO, VERSION, MODES[self.mode]]) + varint(self.n) + varint(self.k)
        if self.mode == "entity":
            if self.key is None:
                raise ValueError("entity mode needs a key")
            hello += varint(len(self.key)) + self.key
            if self.round:   # responder: the peer's HELLO already started round 1
                return [hello]
            if hasattr(self.repo, "store") and not self.repo.has(self.key):
                self.repo.store.add_feed(self.key)   # we ask for this feed: replicate it
            self._set_scope([self.key])
            out = [hello] + self._next_round()
            self.state = S_HELLO   # round 1 is open, the peer's HELLO still due
            return out
        mine = self.repo.keys()
        if self.filter_bits:
            f = KeyFilter(self.filter_bits, 1, self.salt)
        else:
            f = KeyFilter.sized(len(mine), self.salt, self.fpr)
        for key in mine:
            f.add(key)
        return [hello, bytes([FILTER]) + f.encode()]

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
                   EVENTS: self._on_events, NODES: self._on_nodes,
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
            if self.round:   # we initiated: our STATUS(1) went out with our HELLO
                self.state = S_ROUND
                return []
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
                self._mark_tail(root)
                h = D.h_keyed(key, root)
                self.served[h] = (D.T_KEYED, (key, root))
                self.known.add(h)
                leaves.append(h)
                stamp = stamp.add(dag.stamp())
            inner = {}
            root = D.mth(leaves, inner)
            self.served.update(inner)
            self.known.update(inner)
            self._set_nodes.update(inner)
            self.known.add(root)
            self._snap = (root, stamp)
            self._dirty = False
        return self._snap

    def digest(self):
        return self._snapshot()[0]

    # -- rounds -----------------------------------------------------------------------

    def _next_round(self, conclude=False):
        """Start round r+1: STATUS(r+1, ack, stamp, digest), then compare if the peer's
        STATUS is in. `conclude` (at the end of an unconverged round): done at once when
        the peer's last STATUS already equals ours and acked all our data, since the
        peer's events then change only through our data (module docstring)."""
        if self.round:
            self._settle()   # all the peer sent before its ENDR is in: final verdicts now
        self.round += 1
        self.state = S_ROUND
        root, stamp = self._snapshot()
        self.my_status[self.round] = (root, stamp)
        self.my_view = (root, self.data_in)
        out = [bytes([STATUS]) + varint(self.round) + varint(self.data_in) + stamp.encode() + root]
        pv = self.peer_view
        if conclude and self.round not in self.peer_status and pv is not None and \
                pv[0] == root and self.data_out <= pv[1]:
            self.compared.add(self.round)
            self.stats["rounds"] += 1
            self.stats["concluded"] += 1
            return out + self._converged()
        return out + self._maybe_compare()

    def _on_status(self, r):
        """The peer's STATUS: for our current round (compare), for the next one (the peer
        ended the round, maybe concluding it; or starts a maintenance round), or one that
        crossed a round we concluded."""
        rnd = r.uint("round")
        ack = r.uint("ack")
        stamp = BloomClock.read(r, self.k, self.n)
        digest = r.take(32, "digest")
        r.end()
        if ack > self.data_out:
            raise ClockError("ack", ack)
        if rnd in self.compared and rnd not in self.peer_status and rnd <= self.round:
            # Crossed our conclusion of round rnd (possibly followed by a maintenance round
            # of ours): the peer cannot have changed, so it must show our digest.
            if digest != self.my_status[rnd][0]:
                raise ClockError("status_conflict", rnd)
            self.peer_status[rnd] = (digest, stamp)
            self.peer_view = (digest, ack)
            return []
        if rnd == self.round and rnd not in self.peer_status and self.state == S_ROUND:
            self.peer_status[rnd] = (digest, stamp)
            self.peer_view = (digest, ack)
            return self._maybe_compare()
        if rnd != self.round + 1 or not (self.state == S_IDLE or (
                self.state == S_ROUND and self.round in self.sent_endr)):
            raise ClockError("round", rnd)
        ending = self.state == S_ROUND   # else IDLE: the peer starts a maintenance round
        if ending and self.round not in self.peer_endr:
            self._peer_ended(self.round)   # STATUS(r+1) stands for the peer's ENDR(r)
        self.peer_status[rnd] = (digest, stamp)
        concluded = ending and digest == self.my_view[0] and self.data_in <= self.my_view[1]
        self.peer_view = (digest, ack)
        if concluded:
            # The peer's digest equals the one our last STATUS announced and that STATUS
            # acked all its data, so it concluded when sending: agree without a reply.
            self.round = rnd
            self.my_status[rnd] = self._snapshot()
            self.compared.add(rnd)
            self.stats["rounds"] += 1
            return self._converged()
        return self._next_round()   # the peer's STATUS is in: the usual compare

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
        self.diff_est = max(1.0, peer_stamp.events_between(my_stamp))
        self.behind = peer_stamp <= my_stamp and not my_stamp <= peer_stamp
        common = max(1, len(self.dags))
        differing = common * (1 - (1 - 1 / common) ** self.diff_est)
        self.tail_est = self.diff_est / max(1.0, differing) * TAIL_MARGIN
        # Proactive step: what the peer's stamp says it likely misses.
        batch = []
        for key in sorted(self.dags):
            batch += self.dags[key].likely_missing(peer_stamp)
        self.proactive = {ev.eid for ev in batch}
        out = self._events_msgs(batch)
        # Reactive step: descend into the peer's tree where it differs from ours; in a
        # first unconverged round only if the clocks say it holds events we lack (see the
        # module docstring: the next STATUS catches a wrong skip). Both ends know both
        # stamps, so the side to be pulled sends its root (nested) unasked.
        again = self.unconverged > 1
        if again or not peer_stamp <= my_stamp:
            self.stats["pulls"] += 1
            if peer_digest != D.EMPTY:
                self._check_budget(1)
                self.outstanding.add(peer_digest)
                self.stats["trips"] += 1
        else:
            self.stats["pulls_skipped"] += 1
        out += self._maybe_endr()   # first: a peer done with our root then ends at once
        if (again or not my_stamp <= peer_stamp) and mine != D.EMPTY:
            out += self._serve([mine])
        return out

    def _item(self, ev, count=True):
        """Wire form of an event: blob event, varint j, its side-chain chunks."""
        chunks = self.repo.chunks(ev)
        if count:
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

    def _split(self, typ, parts, weights=None):
        """Messages `typ, varint c, part*c`, at most MAX_BATCH parts, MAX_NODES_MSG
        weight (nodes) and about MAX_MSG_BYTES each; returns (messages, parts per message)."""
        weights = weights or [1] * len(parts)
        msgs, sizes = [], []
        i = 0
        while i < len(parts):
            j, size, weight = i, 0, 0
            while j < len(parts) and j - i < MAX_BATCH and (j == i or (
                    size + len(parts[j]) <= MAX_MSG_BYTES and
                    weight + weights[j] <= MAX_NODES_MSG)):
                size += len(parts[j])
                weight += weights[j]
                j += 1
            msgs.append(bytes([typ]) + varint(j - i) + b"".join(parts[i:j]))
            sizes.append(j - i)
            i = j
        return msgs, sizes

    def _events_msgs(self, evs):
        self.stats["events_sent"] += len(evs)
        msgs = self._split(EVENTS, [self._item(ev) for ev in evs])[0]
        self.data_out += len(msgs)
        return msgs

    def _notcommon(self, keys):
        self.data_out += 1
        return bytes([NOTCOMMON]) + varint(len(keys)) + b"".join(varint(len(x)) + x for x in keys)

    def _maybe_endr(self):
        """Our descent of the round is over: ENDR(r), or STATUS(r+1) in its place when the
        peer's ENDR(r) is in (the peer reads it as our ENDR too)."""
        rnd = self.round
        if self.state != S_ROUND or rnd not in self.compared or self.outstanding or rnd in self.sent_endr:
            return []
        self._settle()
        self.sent_endr.add(rnd)
        if rnd in self.peer_endr:
            return self._next_round(conclude=True)
        return [bytes([ENDR]) + varint(rnd)]

    def _on_endr(self, r):
        rnd = r.uint("round")
        r.end()
        if rnd != self.round or rnd in self.peer_endr:
            raise ClockError("round", rnd)
        self._peer_ended(rnd)
        if rnd in self.sent_endr:
            return self._next_round(conclude=True)
        return []

    def _peer_ended(self, rnd):
        self.peer_endr.add(rnd)
        # The peer's descent of this round is over: it names no more of our NODES.
        self.sent_children.clear()
        self.served_round = 0

    # -- descent ----------------------------------------------------------------------

    def _check_budget(self, count):
        if self.stats["nodes_recv"] + len(self.outstanding) + count > MAX_SESSION_NODES:
            raise ClockError("too_many_nodes")

    def _want_children(self, ref, children, eligible):
        """REQC for the open children of the peer's NODES message `ref` that we lack."""
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
        """NODES answering a REQC (or our root, unasked); records each message's open
        children (the bare child hashes, in order) for the peer's REQC."""
        parts, opens, weights, leafy = [], [], [], []
        for h in hashes:
            if self.served_round > MAX_SESSION_NODES:   # bounds sent_children too
                raise ClockError("too_many_reqs")
            part, o, count, leaf = self._answer(h)
            self.served_round += count
            parts.append(part)
            opens.append(o)
            weights.append(count)
            leafy.append(leaf)
        self.stats["nodes_sent"] += sum(weights)
        msgs, sizes = self._split(NODES, parts, weights)
        i = 0
        for size in sizes:
            children = [c for o in opens[i:i + size] for c in o]
            if children:
                self.sent_children[self.nodes_out] = children
            if any(leafy[i:i + size]):
                self.data_out += 1
            self.nodes_out += 1
            i += size
        return msgs

    def _answer(self, h):
        """(wire form, open children, nodes, holds a LEAF) of our node h answering a
        request: the node with the descendants `_expand` picks nested in it."""
        node = self.served.get(h)
        if node is None:
            return bytes([N_UNKNOWN]) + h, [], 1, False
        if node[0] == D.T_LEAF:
            return bytes([D.T_LEAF]) + self._item(self._event(node[1])), [], 1, True
        a = _Answer()
        a.room -= self._bare_size(node)
        self._encode(h, node, h, 0, 0, True, a)
        return bytes(a.buf), a.opens, a.nodes, a.leaf

    def _encode(self, h, node, anchor, t, depth, spine, a):
        """Append node h; `anchor`: the top of the Merkle tree run it is in (the request,
        or the child of a FORK/KEYED), t: its INNER depth below the anchor."""
        a.nodes += 1
        tag, data = node
        kids = data if tag == D.T_INNER else (data,) if tag == D.T_FORK else (data[1],)
        nest = [self._expand(c, h, tag, i, anchor, t, depth, spine, a) for i, c in enumerate(kids)]
        a.buf.append(tag | (X_FIRST if nest[0] else 0) |
                     (X_SECOND if len(kids) > 1 and nest[1] else 0))
        if tag == D.T_KEYED:
            a.buf += varint(len(data[0])) + data[0]
        for c, x in zip(kids, nest):
            if not x:
                a.buf += c
                a.opens.append(c)
            elif x is not True:      # an event: its item
                a.buf.append(D.T_LEAF)
                a.buf += x
                a.nodes += 1
                a.leaf = True
            elif tag == D.T_INNER:
                self._encode(c, self.served[c], anchor, t + 1, depth + 1, spine and c == kids[1], a)
            else:
                self._encode(c, self.served[c], c, 0, depth + 1, True, a)

    def _expand(self, c, parent, ptag, i, anchor, t, depth, spine, a):
        """Nest child c (the i-th of our node `parent`) in the answer? Returns False
        (send its hash), True (nest the node) or an event item (nest the LEAF). Policy:
          * FORK and KEYED children always (they differ whenever their parent does);
          * set tree: INNER children within EXPAND_DEPTH levels of the request, deeper
            ones and KEYED leaves when likely to differ (P from diff_est events falling
            on random entities, relative to the anchor's P);
          * entity tree: the right child (appends change the right spine) and nodes over
            the newest tail_est items;
          * an event, when the peer is `behind` (its stamp is below ours, so where an
            entity differs it lacks the newest events) and the event is the last one under
            the anchor, unless it went out proactively.
        Bounded by the answer's room (one message) and MAX_NEST."""
        node = self.served.get(c)
        if node is None or depth + 1 > MAX_NEST:
            return False
        if node[0] == D.T_LEAF:
            if not self.behind or node[1] in self.proactive or parent in self._set_nodes or \
                    (ptag == D.T_INNER and not (spine and i == 1)):
                return False
            item = self._item(self._event(node[1]), count=False)
            if len(item) + 1 - 32 > a.room or a.nodes_left < 1:
                return False
            self.stats["chunks_sent"] += item_chunks(item)
            a.room -= len(item) + 1 - 32   # in place of its hash
            a.nodes_left -= 1
            return item
        cost = self._bare_size(node) - 32
        if cost > a.room or a.nodes_left < 1:
            return False
        if ptag != D.T_INNER:
            ok = True
        elif parent in self._set_nodes:
            p = self._p_differs(c) / self._p_differs(anchor)
            ok = (t + 1 < EXPAND_DEPTH or p >= EXPAND_P) if node[0] == D.T_INNER \
                else p >= EXPAND_P_KEYED
        else:
            ok = i == 1 or self._tail.get(c, len(self.served)) < self.tail_est
        if ok:
            a.room -= cost
            a.nodes_left -= 1
        return ok

    @staticmethod
    def _bare_size(node):
        """Wire size of a node with its children as hashes."""
        tag, data = node
        if tag == D.T_INNER:
            return 65
        if tag == D.T_KEYED:
            return 33 + len(varint(len(data[0]))) + len(data[0])
        return 33

    def _mark_tail(self, root):
        """Record for each node of an entity tree how many items follow it in its list
        (_expand nests the nodes over the newest items)."""
        todo = [(root, 0)]
        while todo:
            h, after = todo.pop()
            node = self.served.get(h)
            if node is None or self._tail.get(h) == after:
                continue
            self._tail[h] = after
            if node[0] == D.T_INNER:
                todo += [(node[1][0], after + self._size(node[1][1])), (node[1][1], after)]
            elif node[0] == D.T_FORK:
                todo.append((node[1], after))

    def _size(self, h):
        """Items under our node h in its Merkle tree (INNER: both sides; others: 1)."""
        s = self._sizes.get(h)
        if s is None:
            node = self.served.get(h)
            inner = node is not None and node[0] == D.T_INNER
            s = self._size(node[1][0]) + self._size(node[1][1]) if inner else 1
            self._sizes[h] = s
        return s

    def _p_differs(self, h):
        """P(a set-tree node differs from the peer's) if diff_est events it lacks fall on
        random common entities."""
        frac = min(1.0, self._size(h) / max(1, len(self.dags)))
        return 1 - (1 - frac) ** self.diff_est

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
        rd = _NodesRead()
        for _ in range(cnt):
            h = self._read_node(r, rd, 0, True)
            if h not in self.outstanding:
                raise ClockError("unrequested_node")
            self.outstanding.discard(h)
        r.end()
        self.stats["nodes_recv"] += rd.count
        if self.stats["nodes_recv"] > MAX_SESSION_NODES:
            raise ClockError("too_many_nodes")
        out = [self._notcommon(rd.stray)] if rd.stray else []
        if rd.events:
            self.data_in += 1
        for ev in rd.events:
            out += self._accept(ev)
        out += self._want_children(ref, rd.opens, rd.eligible)
        return out + self._maybe_endr()

    def _read_node(self, r, rd, depth, eligible):
        """Parse one node (and the nodes nested in it); returns its hash. Only an answer
        itself (depth 0) may be a LEAF or unknown; open children go to rd.opens."""
        rd.count += 1
        if rd.count > MAX_NODES_MSG:
            raise ClockError("node_count", rd.count)
        tag = r.byte("node tag")
        if tag == N_UNKNOWN:
            if depth:   # only an answer itself can be a node the peer does not hold
                raise ClockError("node_nested", tag)
            return r.take(32, "hash")
        if tag == D.T_LEAF:
            ev = self._read_item(r)
            rd.events.append(ev)
            return D.h_leaf(ev.eid)
        base, flags = tag & 0x0F, tag & 0xF0
        if base == D.T_INNER and not flags & ~(X_FIRST | X_SECOND):
            left = self._read_child(r, rd, depth, eligible, flags & X_FIRST)
            right = self._read_child(r, rd, depth, eligible, flags & X_SECOND)
            return D.h_inner(left, right)
        if base == D.T_FORK and flags in (0, X_FIRST):
            return D.h_fork(self._read_child(r, rd, depth, eligible, flags))
        if base == D.T_KEYED and flags in (0, X_FIRST):
            key = r.blob("key", MAX_KEY_LEN)
            common = key in self.dags
            if not common and key not in self.notcommon_sent:
                self.notcommon_sent.add(key)
                self.stats["false_positives"] += 1
                rd.stray.append(key)
            return D.h_keyed(key, self._read_child(r, rd, depth, eligible and common, flags))
        raise ClockError("node_tag", tag)

    def _read_child(self, r, rd, depth, eligible, nested):
        if nested:
            if depth + 1 > MAX_NEST:
                raise ClockError("node_depth", depth + 1)
            return self._read_node(r, rd, depth + 1, eligible)
        h = r.take(32, "hash")
        rd.opens.append(h)
        rd.eligible.append(eligible)
        return h

    # -- events -------------------------------------------------------------------------

    def _on_events(self, r):
        cnt = r.uint("event count", MAX_BATCH)
        evs = [self._read_item(r) for _ in range(cnt)]   # all checked before any is stored
        r.end()
        self.data_in += 1
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
            out.insert(0, self._notcommon(stray))
        return out

    def _on_notcommon(self, r):
        cnt = r.uint("key count", MAX_BATCH)
        keys = [r.blob("key", MAX_KEY_LEN) for _ in range(cnt)]
        r.end()
        if self.mode == "entity":
            raise ClockError("notcommon_in_entity_mode")
        self.data_in += 1
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
        if self.budget is not None:
            self.budget.take("unverified", 1 + len(ev.chunks))   # BudgetExceeded: cut off
        self.pending[ev.eid] = ev
        self.pending_chunks += len(ev.chunks)
        self.stats["pended"] += 1
        self.known.add(D.h_leaf(ev.eid))   # held here: the descent need not fetch it again

    def _unpend(self, eid):
        ev = self.pending.pop(eid, None)
        if ev is not None:
            self.pending_chunks -= len(ev.chunks)
            if self.budget is not None:
                self.budget.give("unverified", 1 + len(ev.chunks))
        return ev

    def release(self):
        """The sync is over: return the budget charge of events still pending."""
        if self.budget is not None:
            self.budget.give("unverified", len(self.pending) + self.pending_chunks)

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


class _Answer:
    """One answer being encoded."""

    def __init__(self):
        self.buf = bytearray()
        self.opens = []      # bare child hashes in order
        self.nodes = 0
        self.room = MAX_ANSWER_BYTES   # bytes left: the answer fits one message
        self.nodes_left = MAX_EXPAND - 1
        self.leaf = False    # holds an event (a data message, see STATUS acks)


def item_chunks(item):
    """Number of side-chain chunks in an encoded event item."""
    r = Reader(item)
    r.blob()
    return r.uint()


class _NodesRead:
    """What parsing one NODES message collects."""

    def __init__(self):
        self.count = 0       # nodes, nested ones included
        self.opens = []      # bare child hashes in order (REQC numbers them)
        self.eligible = []   # per open child: under a key we replicate
        self.events = []     # LEAF answers
        self.stray = []      # keys of KEYED nodes we do not replicate
