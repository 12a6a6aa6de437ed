"""The trDAG sync state machine (sans-IO): frames in, frames out, no clock, no sockets.

Both ends run the same machine; `initiator` only orders the HELLOs and the salt inputs.

  1. HELLO: root ID, a fresh nonce, local maximum depth d and member count. The salt is
     BLAKE2b(nonce_i || nonce_r || root); every message ID is hashed with it (keyed
     BLAKE2b, HASH_LEN bytes) for this session only.
  2. dmin = min(d_a, d_b). Messages deeper than dmin exist only on the deeper side: it
     pushes them at once (a "blind range": the receiver knows only their aggregate).
  3. Walk, in lock-step rounds over the forest of depths 1..dmin. Round 1 carries the tree
     roots' aggregates; afterwards a side sends, for each node that differed, the
     aggregates of its descendants `levels` tree levels down except the last, which both
     infer from the parent (parent minus the others; the spec's sibling inference). Both
     ends see both aggregates of every node, so both derive the same next set of nodes
     and a round body carries aggregates only, in that shared order.
     A differing node is resolved without descending when
       - the peer's count there is 0: push all of ours;  ours is 0: expect theirs (blind);
       - it is a leaf (one depth), or both counts are <= cutoff: in the next round each
         side sends its hashed IDs there (the peer knows how many from the aggregate).
  4. Transfer runs in parallel: DATA frames follow each round as soon as a side knows what
     the other lacks, in depth order, each validated on arrival and admitted by `Dag`.
  5. FINAL: the aggregate of the union each side expects; on the peer's FINAL (which
     follows all its DATA) a side checks that it received every announced message, that
     its DAG now equals its own expectation and that both expectations agree.

Modes: MODE_WALK with levels=1, cutoff=0 is the spec's basic walk; levels>1 / cutoff>0 is
the round-efficient variant (fewer rounds, more aggregates per round); MODE_NAIVE sends
all hashed IDs in round 1 (baseline).

Any inconsistency raises TrdagError; the driver sends `abort_frame(err)` and stops.
"""
import hashlib
import os

from tinyssb.aggregate import Aggregate
from tssb.trdag import forest, wire
from tssb.trdag.errors import TrdagError
from tssb.trdag.message import parse_element

MODE_WALK = 1
MODE_NAIVE = 2
# 128-bit hashed IDs: see docs/trdag.md "Hash length" (a false "equal" needs a 2^-128
# guess per compared node; in-session ID collisions ~n^2/2^129 for n messages).
HASH_LEN = 16
MAX_LEVELS = 8            # 2^8 - 1 aggregates per differing node and round is plenty
MAX_CUTOFF = 4096
MAX_COUNT = 1 << 22       # members / depth a peer may announce (4M messages per DAG)
SALT_PERSON = b"tssb-trdag-salt1"


class Options:
    """Walk parameters (chosen by the initiator, echoed by the responder)."""

    def __init__(self, mode=MODE_WALK, levels=1, cutoff=0):
        self.mode = mode
        self.levels = levels
        self.cutoff = cutoff

    def check(self):
        if self.mode not in (MODE_WALK, MODE_NAIVE) or not 1 <= self.levels <= MAX_LEVELS \
                or not 0 <= self.cutoff <= MAX_CUTOFF:
            raise TrdagError("bad_options", "%d/%d/%d" % (self.mode, self.levels, self.cutoff))

    def name(self):
        if self.mode == MODE_NAIVE:
            return "naive"
        # a token (the event schema's `mode`): multi-l3-c8 is 3 levels per round, ID
        # lists at 8 messages or fewer
        return "basic" if (self.levels, self.cutoff) == (1, 0) else \
            "multi-l%d-c%d" % (self.levels, self.cutoff)


BASIC = Options()
FAST = Options(levels=3, cutoff=8)
NAIVE = Options(MODE_NAIVE)
VARIANTS = {"basic": BASIC, "fast": FAST, "naive": NAIVE}


class Stats:
    """Counters of one session (for sync_done events and summaries)."""

    def __init__(self):
        self.rounds = 0
        self.bytes_sent = self.bytes_recv = 0
        self.recon_bytes_sent = self.recon_bytes_recv = 0   # everything but DATA frames
        self.msgs_sent = self.msgs_recv = 0
        self.elements_sent = self.elements_recv = 0

    def as_dict(self):
        return dict(self.__dict__)


def _zero_ok(a):
    # An aggregate of nothing must have an all-zero XOR (and no count below zero).
    if a.count < 0 or (a.count == 0 and any(a.xor)):
        raise TrdagError("inconsistent_aggregate", repr(a))
    return a


class SyncSession:
    """One trDAG reconciliation of one DAG with one peer.

    Args:
        dag: dagstore.Dag (index + admission) of this side.
        root: 20-byte root ID (initiator); the responder learns it from the HELLO.
        initiator: True on the side that opened the stream.
        options: Options (initiator); the responder follows the initiator's.
        nonce: 16 bytes (tests); default os.urandom.
    """

    def __init__(self, dag, root=None, initiator=True, options=BASIC, nonce=None):
        if initiator and (root is None or len(root) != wire.ROOT_LEN):
            raise ValueError("initiator needs a 20-byte root")
        options.check()
        self.dag = dag
        self.root = root
        self.initiator = initiator
        self.opt = options
        self.nonce = os.urandom(wire.NONCE_LEN) if nonce is None else nonce
        self.stats = Stats()
        self.phase = "hello"
        self.error = None
        self._hello = {}          # "me"/"peer" -> fields
        self._round = 0
        self._parts = []
        self._parts_len = 0
        self._groups = []         # (parent node or None, peer's parent aggregate, nodes)
        self._slots = []          # (node, my aggregate, peer aggregate): ID lists next round
        self._expected = {}       # hashed ID -> node the peer listed it in
        self._pull_agg = Aggregate(HASH_LEN)
        self._blind = []          # [lo, hi or None, expected aggregate, received aggregate]
        self._push = []           # my message IDs to send with the next flight
        self._got_agg = Aggregate(HASH_LEN)   # admitted from the peer
        self._final_sent = None

    # -- public -------------------------------------------------------------------------

    @property
    def done(self):
        return self.phase in ("done", "error")

    @property
    def ok(self):
        return self.phase == "done"

    def start(self):
        """Returns: frames to send first (the initiator's HELLO; nothing for a responder)."""
        if not self.initiator:
            return []
        return self._out([self._my_hello()])

    def receive(self, frame):
        """Feed one received frame. Returns: frames to send. Raises: TrdagError."""
        try:
            return self._out(self._receive(bytes(frame)))
        except TrdagError as e:
            self.phase = "error"
            self.error = e
            raise

    def abort_frame(self, err):
        """The ABORT frame telling the peer why we stop."""
        return wire.abort(err.reason)

    # -- frame dispatch -----------------------------------------------------------------

    def _out(self, frames):
        for f in frames:
            self.stats.bytes_sent += len(f)
            self.stats.msgs_sent += 1
            if f[0] == wire.DATA:
                self.stats.elements_sent += 1
            else:
                self.stats.recon_bytes_sent += len(f)
        return frames

    def _receive(self, frame):
        if self.done:
            raise TrdagError("frame_after_end")
        if not frame:
            raise TrdagError("empty_frame")
        st = self.stats
        st.bytes_recv += len(frame)
        st.msgs_recv += 1
        kind = frame[0]
        if kind != wire.DATA:
            st.recon_bytes_recv += len(frame)
        if kind == wire.ABORT:
            raise TrdagError("peer_abort", frame[1:wire.MAX_REASON + 1].decode("utf-8", "replace"))
        if kind == wire.HELLO:
            return self._on_hello(frame)
        if self.phase == "hello":
            raise TrdagError("unexpected_frame", kind)
        if kind in (wire.PART, wire.ROUND):
            self._parts_len += len(frame) - 1
            if self._parts_len > wire.MAX_ROUND_BYTES:
                raise TrdagError("round_too_large")
            self._parts.append(frame[1:])
            if kind == wire.PART:
                return []
            body = b"".join(self._parts)
            self._parts, self._parts_len = [], 0
            return self._on_round(body)
        if kind == wire.DATA:
            st.elements_recv += 1
            self._on_data(frame[1:])
            return []
        if kind == wire.FINAL:
            return self._on_final(frame)
        raise TrdagError("unknown_frame", kind)

    # -- HELLO --------------------------------------------------------------------------

    def _my_hello(self):
        idx = self.dag.index
        root_msg = idx.get(self.root)
        has_root = root_msg is not None and root_msg.is_root
        members = idx.members(self.root) if has_root else []
        self._members = members
        depth = max((d for d, _ in members), default=0)
        self._hello["me"] = {"has_root": has_root, "depth": depth, "total": len(members),
                             "nonce": self.nonce}
        o = self.opt
        return wire.hello(has_root, o.mode, o.levels, o.cutoff, HASH_LEN, self.root,
                          self.nonce, depth, len(members))

    def _on_hello(self, frame):
        if self.phase != "hello":
            raise TrdagError("unexpected_frame", "second HELLO")
        h = wire.parse_hello(frame, MAX_COUNT)
        if h["hash_len"] != HASH_LEN:
            raise TrdagError("bad_options", "hash_len %d" % h["hash_len"])
        peer_opt = Options(h["mode"], h["levels"], h["cutoff"])
        peer_opt.check()
        if h["depth"] > h["total"] or (h["total"] and not h["has_root"]):
            raise TrdagError("wrong_count", "depth %d, total %d" % (h["depth"], h["total"]))
        out = []
        if self.initiator:
            if h["root"] != self.root or (peer_opt.mode, peer_opt.levels, peer_opt.cutoff) != \
                    (self.opt.mode, self.opt.levels, self.opt.cutoff):
                raise TrdagError("bad_options", "responder changed root or options")
        else:
            self.root = h["root"]
            self.opt = peer_opt
            out.append(self._my_hello())
        self._hello["peer"] = h
        if not h["has_root"] and not self._hello["me"]["has_root"]:
            raise TrdagError("unknown_root", self.root.hex())
        return out + self._begin()

    # -- setting up the forest ----------------------------------------------------------

    def _hid(self, mid):
        return hashlib.blake2b(mid, digest_size=HASH_LEN, key=self._salt).digest()

    def _begin(self):
        me, peer = self._hello["me"], self._hello["peer"]
        n_i, n_r = (me["nonce"], peer["nonce"]) if self.initiator else (peer["nonce"], me["nonce"])
        self._salt = hashlib.blake2b(n_i + n_r + self.root, digest_size=32,
                                     person=SALT_PERSON).digest()
        self._dmin = dmin = min(me["depth"], peer["depth"])
        self._mine = {}                               # hashed ID -> (mid, depth)
        self._by_depth = {}                           # depth -> [hashed ID]
        # Per-depth (count, XOR) kept as Python ints while building: 10^5 IDs in a blink.
        # Every aggregate that is sent or compared is a tinyssb Aggregate (see _agg).
        cnt = [0] * (dmin + 1)
        xor = [0] * (dmin + 1)
        all_x = deep_x = deep_c = 0
        for d, mid in self._members:
            h = self._hid(mid)
            if h in self._mine:
                raise TrdagError("hash_collision")     # ~2^-90 for 2^20 messages
            self._mine[h] = (mid, d)
            self._by_depth.setdefault(d, []).append(h)
            v = int.from_bytes(h, "big")
            all_x ^= v
            if d > dmin:
                deep_x ^= v
                deep_c += 1
                self._push.append(mid)
            else:
                cnt[d] += 1
                xor[d] ^= v
        self._mine_all = _agg_of(len(self._members), all_x)
        self._my_deep = _agg_of(deep_c, deep_x)
        self._members = None
        for d in range(1, dmin + 1):                  # prefix sums: index i = depths 1..i
            cnt[d] += cnt[d - 1]
            xor[d] ^= xor[d - 1]
        self._prefix = (cnt, xor)
        self._expect_root = not me["has_root"]
        if me["has_root"] and not peer["has_root"]:
            self._push.insert(0, self.root)
        self._groups = [(None, None, forest.trees(dmin))]
        self.phase = "walk"
        self._round = 1
        return wire.round_frames(self._round_body()) + self._flush_push()

    def _agg(self, node):
        cnt, xor = self._prefix
        hi, lo = forest.last(node), node[0] - 1
        return _agg_of(cnt[hi] - cnt[lo], xor[hi] ^ xor[lo])

    def _ids_in(self, node):
        out = []
        for d in range(node[0], forest.last(node) + 1):
            out.extend(self._by_depth.get(d, ()))
        return out

    # -- rounds -------------------------------------------------------------------------

    @staticmethod
    def _put_agg(body, a):
        body += wire.varint(a.count)
        body += a.xor

    def _round_body(self):
        body = bytearray(wire.varint(self._round))
        if self._round == 1:
            self._put_agg(body, self._my_deep)
            if self.opt.mode == MODE_NAIVE:
                ids = self._ids_in((1, self._dmin))
                body += wire.varint(len(ids))
                for h in ids:
                    body += h
                return bytes(body)
        for parent, _, nodes in self._groups:
            for node in (nodes if parent is None else nodes[:-1]):
                self._put_agg(body, self._agg(node))
        for node, mine, _ in self._slots:
            for h in self._ids_in(node):
                body += h
        return bytes(body)

    def _read_agg(self, r):
        count = r.varint(self._hello["peer"]["total"])
        return _zero_ok(Aggregate(HASH_LEN, count, r.take(HASH_LEN)))

    def _on_round(self, body):
        if self.phase != "walk":
            raise TrdagError("unexpected_frame", "round after walk")
        r = wire.Reader(body)
        if r.varint(MAX_COUNT) != self._round:
            raise TrdagError("round_mismatch")
        peer = self._hello["peer"]
        if self._round == 1:
            deep = self._read_agg(r)
            if (deep.count > 0) != (peer["depth"] > self._dmin):
                raise TrdagError("wrong_count", "deep part %d" % deep.count)
            if deep.count:
                self._blind.append([self._dmin + 1, None, deep, Aggregate(HASH_LEN)])
            if self.opt.mode == MODE_NAIVE:
                return self._on_naive(r, deep)
        groups, slots = [], []
        top = 0
        for parent, parent_peer, nodes in self._groups:
            explicit = nodes if parent is None else nodes[:-1]
            aggs = [self._read_agg(r) for _ in explicit]
            if parent is None:
                top = sum(a.count for a in aggs)
            else:
                rest = parent_peer
                for a in aggs:
                    rest = rest.minus(a)
                aggs.append(_zero_ok(rest))          # inferred: parent minus the others
            for node, theirs in zip(nodes, aggs):
                self._compare(node, self._agg(node), theirs, groups, slots)
        if self._round == 1 and top + self._blind_count() != peer["total"]:
            raise TrdagError("wrong_count", "trees %d + deep %d != total %d"
                             % (top, self._blind_count(), peer["total"]))
        for node, mine, theirs in self._slots:
            self._on_id_list(node, r, theirs)
        r.end()
        self._groups, self._slots = groups, slots
        if groups or slots:
            self._round += 1
            return wire.round_frames(self._round_body()) + self._flush_push()
        return self._finish_walk()

    def _blind_count(self):
        return sum(b[2].count for b in self._blind)

    def _compare(self, node, mine, theirs, groups, slots):
        if mine == theirs:
            return
        if theirs.count == 0:
            self._push.extend(self._mine[h][0] for h in self._ids_in(node))
        elif mine.count == 0:
            self._blind.append([node[0], forest.last(node), theirs, Aggregate(HASH_LEN)])
        elif node[1] == 1 or (mine.count <= self.opt.cutoff and theirs.count <= self.opt.cutoff):
            slots.append((node, mine, theirs))
        else:
            groups.append((node, theirs, forest.descend(node, self.opt.levels)))

    def _on_id_list(self, node, r, theirs):
        """Read the peer's `theirs.count` hashed IDs for node; they must aggregate to
        `theirs`. Records what to pull and what to push."""
        x = 0
        seen = set()
        for _ in range(theirs.count):
            h = r.take(HASH_LEN)
            if h in seen:
                raise TrdagError("ids_mismatch_aggregate", "duplicate ID")
            seen.add(h)
            x ^= int.from_bytes(h, "big")
            if h in self._mine:
                if not forest.contains(node, self._mine[h][1]):
                    raise TrdagError("ids_mismatch_aggregate", "ID listed at another depth")
            elif h not in self._expected:
                self._expected[h] = node
                self._pull_agg.add(h)
        if _agg_of(len(seen), x) != theirs:
            raise TrdagError("ids_mismatch_aggregate", "list does not match aggregate")
        self._push.extend(self._mine[h][0] for h in self._ids_in(node) if h not in seen)

    def _on_naive(self, r, deep):
        peer = self._hello["peer"]
        n = r.varint(peer["total"])
        if n + deep.count != peer["total"]:
            raise TrdagError("wrong_count", "naive list %d + deep %d" % (n, deep.count))
        if r.left() != n * HASH_LEN:
            raise TrdagError("truncated_frame" if r.left() < n * HASH_LEN else "trailing_bytes")
        self._on_id_list((1, self._dmin), r, _read_list_agg(r.buf, r.pos, n))
        r.end()
        return self._finish_walk()

    # -- transfer -----------------------------------------------------------------------

    def _flush_push(self):
        if not self._push:
            return []
        idx = self.dag.index
        msgs = [idx.get(m) for m in self._push]
        self._push = []
        msgs.sort(key=lambda m: m.depth)           # children before parents where possible
        return [bytes((wire.DATA,)) + m.element() for m in msgs]

    def _on_data(self, element):
        msg = parse_element(element)
        if msg.is_root:
            if msg.mid != self.root or not self._expect_root:
                raise TrdagError("unexpected_message", "root")
            self._expect_root = False
            self._admit(msg)
            return
        if msg.root != self.root:
            raise TrdagError("wrong_root", msg.mid.hex())
        h = self._hid(msg.mid)
        node = self._expected.pop(h, None)
        if node is not None:
            if not forest.contains(node, msg.depth):
                raise TrdagError("unexpected_message", "depth outside announced range")
        else:
            for b in self._blind:
                if b[0] <= msg.depth and (b[1] is None or msg.depth <= b[1]):
                    if b[3].count >= b[2].count or h in self._mine:
                        raise TrdagError("unexpected_message", "more than announced")
                    b[3].add(h)
                    break
            else:
                raise TrdagError("unexpected_message", msg.mid.hex())
        self._admit(msg)

    def _admit(self, msg):
        for m in self.dag.offer(msg):
            if not m.is_root:
                self._got_agg.add(self._hid(m.mid))

    # -- final check --------------------------------------------------------------------

    def _finish_walk(self):
        u = self._mine_all.union(self._pull_agg)
        for b in self._blind:
            u = u.union(b[2])
        self._final_sent = u
        self.phase = "final"
        self._round += 1
        return self._flush_push() + [wire.final(u.count, u.xor)]

    def _on_final(self, frame):
        if self.phase != "final":
            raise TrdagError("unexpected_final")
        r = wire.Reader(frame, 1)
        theirs = Aggregate(HASH_LEN, r.varint(MAX_COUNT), r.take(HASH_LEN))
        r.end()
        if self._expect_root or self._expected:
            raise TrdagError("missing_messages", "%d announced, not received"
                             % (len(self._expected) + self._expect_root))
        for b in self._blind:
            if b[2] != b[3]:
                raise TrdagError("blind_range_mismatch", "depths %s..%s" % (b[0], b[1]))
        if self.dag.pending:
            raise TrdagError("unresolved_children", "%d waiting" % len(self.dag.pending))
        if theirs != self._final_sent or self._mine_all.union(self._got_agg) != theirs:
            raise TrdagError("final_mismatch")
        self.stats.rounds = self._round + 1    # HELLO + ROUNDs + FINAL
        self.phase = "done"
        return []


def _agg_of(count, x):
    return Aggregate(HASH_LEN, count, x.to_bytes(HASH_LEN, "big"))


def _read_list_agg(buf, pos, n):
    x = 0
    for i in range(pos, pos + n * HASH_LEN, HASH_LEN):
        x ^= int.from_bytes(buf[i:i + HASH_LEN], "big")
    return _agg_of(n, x)
