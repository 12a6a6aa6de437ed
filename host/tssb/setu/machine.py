"""The SETU state machine (draft sections 5 and 8.2), sans-IO.

`Reconciler(eset, initiator, config)` turns received messages into messages to send:
`start()` (initiator only) and `receive(msg)` return lists of encoded messages. It never
does I/O; driver.py runs it over a Channel. Allowed (state, message) pairs are the table
`TRANSITIONS`; anything else aborts (draft 8.2: "if any other message is received the peer
MUST terminate"). Every abort raises SetuError with a stable reason and leaves the machine
in ERROR.

Differential mode, as run here (the channel is ordered and reliable):
  initiator I                        responder R
  OPERATION_REQUEST  ------------->
                     <-------------  SE / SEC
  IBF*, IBF_LAST     ------------->  (R is now active, I passive)
  active decodes. On failure it sends a new IBF (next size, salt+1) and turns passive
  (role swap, at most 30). No partial results of a failed IBF are used, so nothing is in
  flight across a swap. On success the active sends INQUIRY (its missing keys), OFFER (its
  extra elements' hashes) and DONE#1 ("no more requests"). Then each side answers OFFER with
  DEMAND (if missing), INQUIRY with OFFER, DEMAND with ELEMENT. The passive sends DONE#2
  with its union checksum once DONE#1 arrived and its demands are met; the active, once its
  own demands are met, checks that checksum against its own and sends DONE#3; the passive
  checks DONE#3 the same way.
Full mode: SEND_FULL or REQUEST_FULL, the first sender's FULL_ELEMENTs and FULL_DONE (the
XOR of the hashes it sent), then the receiver's missing elements and FULL_DONE with the
union checksum.
Profile `rateless`: the initiator opens with an RL_REQUEST instead of the OPERATION_REQUEST
(rateless.request: a short application tag, the element count and the first coded symbols
in one message); from it on the Reconciler hands every message to a
rateless.RatelessMachine (coded symbols instead of estimator and IBFs). An
OPERATION_REQUEST proposing the profile (an older peer of ours) is refused.

Resources: IBF buckets are charged to the operation's budget (tssb.session.budget,
"ibf_buckets") while held: a received IBF from its first slice until it is decoded, the
local IBF built to decode it, and each IBF we build to send until it is serialised. With
`lazy_output` set (the driver does), a full-set transfer is returned as one generator
that builds each FULL_ELEMENT as the driver sends it, instead of a copy of the whole set.
"""
import hashlib

from . import constants as C
from . import messages as M
from . import policy
from . import rateless as RL
from . import strata as S
from .errors import SetuError
from .ibf import IBF, counter_bits, max_buckets_per_message, slice_bucket_count
from .profiles import element_hash, key_from_hash, profile as get_profile, salt_key, unsalt_key

DEFAULT_APP_ID = hashlib.sha512(b"tinySSB SETU v1").digest()

# States (draft 8.2 names).
EXPECT_CONN = "expecting_connection"
EXPECT_SE = "expect_se"
EXPECT_IBF = "expecting_ibf"
EXPECT_IBF_LAST = "expecting_ibf_last"
FULL_SENDING = "full_sending"
FULL_RECEIVING = "full_receiving"
ACTIVE = "active_decoding"
PASSIVE = "passive_decoding"
FINISH_CLOSING = "finish_closing"
FINISH_WAITING = "finish_waiting"
FINISHED = "finished"
ERROR = "error"

TRANSITIONS = {
    (EXPECT_CONN, C.MSG_OPERATION_REQUEST): "_on_opreq",
    (EXPECT_SE, C.MSG_SE): "_on_se",
    (EXPECT_SE, C.MSG_SEC): "_on_se",
    (EXPECT_IBF, C.MSG_REQUEST_FULL): "_on_full_request",
    (EXPECT_IBF, C.MSG_SEND_FULL): "_on_full_request",
    (EXPECT_IBF, C.MSG_IBF): "_on_ibf",
    (EXPECT_IBF, C.MSG_IBF_LAST): "_on_ibf",
    (EXPECT_IBF_LAST, C.MSG_IBF): "_on_ibf",
    (EXPECT_IBF_LAST, C.MSG_IBF_LAST): "_on_ibf",
    (FULL_SENDING, C.MSG_FULL_ELEMENT): "_on_full_element",
    (FULL_SENDING, C.MSG_FULL_DONE): "_on_full_done",
    (FULL_RECEIVING, C.MSG_FULL_ELEMENT): "_on_full_element",
    (FULL_RECEIVING, C.MSG_FULL_DONE): "_on_full_done",
    (ACTIVE, C.MSG_OFFER): "_on_offer",
    (ACTIVE, C.MSG_DEMAND): "_on_demand",
    (ACTIVE, C.MSG_ELEMENTS): "_on_element",
    (ACTIVE, C.MSG_DONE): "_on_done",
    (PASSIVE, C.MSG_INQUIRY): "_on_inquiry",
    (PASSIVE, C.MSG_OFFER): "_on_offer",
    (PASSIVE, C.MSG_DEMAND): "_on_demand",
    (PASSIVE, C.MSG_ELEMENTS): "_on_element",
    (PASSIVE, C.MSG_DONE): "_on_done",
    (PASSIVE, C.MSG_IBF): "_on_ibf",
    (PASSIVE, C.MSG_IBF_LAST): "_on_ibf",
    (FINISH_CLOSING, C.MSG_ELEMENTS): "_on_element",
    (FINISH_WAITING, C.MSG_ELEMENTS): "_on_element",
    (FINISH_WAITING, C.MSG_DEMAND): "_on_demand",
    (FINISH_WAITING, C.MSG_DONE): "_on_done",
}


class Config:
    """Operation parameters; both peers must agree on app_id, profile and forcing.

    Args:
        profile_id: profile the initiator proposes (constants.PROFILE_*).
        allowed_profiles: profiles a responder accepts.
        force: None, "full" or "differential" (testing only, draft 5.3).
        allow_force: whether a responder accepts a forced mode.
        lower_bound / upper_bound: byzantine bounds on set sizes (draft 8.1.2).
        max_ibf_size: resource bound on a received IBF (buckets).
        rtt: bytes charged per round trip in the mode decision.
        pad_counters: send IBF counters in GNUnet's padded 20-byte-bucket layout.
        rl_first_symbols: rateless: symbols in the first flight (k1).
        rl_first_symbols_max: rateless: most first-flight symbols a responder accepts.
        rl_prefix: rateless: coded symbols kept per set (None: rateless.prefix_length(n));
            extended on demand.
        rl_max_symbols: rateless: most symbols streamed or accepted in one operation.
        rl_max_more: rateless: extra exchanges after an undershoot before giving up.
        rl_search_tests: rateless: checksum tests one operation spends searching its own
            keys when peeling stalls (rateless.own_key_search).
        rl_search_s: rateless: seconds (CPU and wall time) one operation's searches take
            at most; rl_search_pairs: candidate pairs one search keeps.
        rl_first_search_s, rl_first_search_pairs: rateless: the same for a responder's
            search of a first flight (CPU seconds; the peer chose those symbols).
    """

    def __init__(self, profile_id=C.PROFILE_TSSB2,
                 allowed_profiles=(C.PROFILE_GNUNET, C.PROFILE_TSSB2, C.PROFILE_RATELESS),
                 app_id=DEFAULT_APP_ID, force=None, allow_force=False, lower_bound=0,
                 upper_bound=1 << 26, max_ibf_size=C.MAX_IBF_SIZE, rtt=C.RTT_BANDWIDTH_TRADEOFF,
                 pad_counters=False, compress_se=True, max_role_swaps=C.MAX_ROLE_SWAPS,
                 rl_first_symbols=RL.FIRST_SYMBOLS, rl_first_symbols_max=RL.FIRST_SYMBOLS_MAX,
                 rl_prefix=None, rl_max_symbols=RL.MAX_RL_SYMBOLS,
                 rl_max_more=RL.MAX_MORE_ROUNDS, rl_search_tests=RL.SEARCH_MAX_TESTS,
                 rl_search_s=RL.SEARCH_MAX_SECONDS, rl_search_pairs=RL.SEARCH_MAX_PAIRS,
                 rl_first_search_s=RL.FIRST_SEARCH_SECONDS,
                 rl_first_search_pairs=RL.FIRST_SEARCH_PAIRS):
        if force not in (None, "full", "differential"):
            raise ValueError("force must be None, 'full' or 'differential'")
        self.profile_id = profile_id
        self.allowed_profiles = tuple(allowed_profiles)
        self.app_id = app_id
        self.force = force
        self.allow_force = allow_force
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        self.max_ibf_size = max_ibf_size
        self.rtt = rtt
        self.pad_counters = pad_counters
        self.compress_se = compress_se
        self.max_role_swaps = max_role_swaps
        self.rl_first_symbols = rl_first_symbols
        self.rl_first_symbols_max = rl_first_symbols_max
        self.rl_prefix = rl_prefix
        self.rl_max_symbols = rl_max_symbols
        self.rl_max_more = rl_max_more
        self.rl_search_tests = rl_search_tests
        self.rl_search_s = rl_search_s
        self.rl_search_pairs = rl_search_pairs
        self.rl_first_search_s = rl_first_search_s
        self.rl_first_search_pairs = rl_first_search_pairs


def _xor_hashes(hs):
    acc = 0
    for h in hs:
        acc ^= int.from_bytes(h, "big")
    return acc.to_bytes(C.HASH_SIZE, "big")


class Reconciler:
    """One SETU operation over one ordered, reliable message stream."""

    def __init__(self, eset, initiator, config=None, budget=None):
        self.initiator = initiator
        self.cfg = config or Config()
        self.budget = budget          # None: no accounting (in-memory tests, benchmarks)
        self.lazy_output = False      # True: full transfers come back as one generator
        # A provider (rateless_store.StoreSets) builds the set for the profile in use only.
        self._provider = eset if hasattr(eset, "for_profile") else None
        if self._provider is not None and initiator:
            eset = self._provider.for_profile(self.cfg.profile_id)
        self.eset = eset
        self.state = None if initiator else EXPECT_CONN
        self._rl = None               # RatelessMachine once the rateless profile is agreed
        rateless = self.cfg.profile_id == C.PROFILE_RATELESS   # a responder learns its profile
        self.profile = None if rateless else get_profile(self.cfg.profile_id)
        self.error = None
        self.stats = dict(mode=None, rounds=0, role_swaps=0, decode_failures=0,
                          elements_sent=0, elements_recv=0, lsd=None, rsd=None, profile=None)
        self._local_size0 = len(eset)
        self._remote_size = None      # committed remote set size
        self._remote_avg = 0
        self._flags = 0
        self._salt = 0                # salt of the current round's IBF
        self._last_ibf_size = None
        self._rx_ibf = None           # IBF being received: [IBF, salt, bits, filled]
        self._reset_round()
        self._full = None             # full-mode counters

    # -- public --------------------------------------------------------------------------

    @property
    def finished(self):
        return self.state == FINISHED

    @property
    def confirming(self):
        """The initiator has sent its last elements and waits for the peer to confirm what
        it stored (rateless, version 2)."""
        return self._rl is not None and self._rl.confirming

    def start(self):
        """Initiator: the OPERATION_REQUEST. Returns a list of messages to send."""
        if not self.initiator or self.state is not None:
            raise RuntimeError("start() is for a fresh initiator")
        flags = {None: 0, "full": M.FLAG_FORCE_FULL, "differential": M.FLAG_FORCE_DIFF}[self.cfg.force]
        self._flags = flags
        if self.cfg.profile_id == C.PROFILE_RATELESS:
            self._rl = RL.RatelessMachine(self.eset, True, self.cfg, self.stats,
                                           budget=self.budget, version=RL.RL_VERSION)
            out = self._rl.start(self.cfg.app_id)
            self.state = self._rl.state
            return out
        self.stats["profile"] = self.profile.name
        app = M.app_data(self.profile.pid, flags, self.eset.avg_element_size())
        self.state = EXPECT_SE
        return [M.operation_request(len(self.eset), self.cfg.app_id, app)]

    def receive(self, buf):
        """Process one received message.

        Returns:
            list of encoded messages to send, in order.
        Raises:
            SetuError: the operation is aborted (state ERROR, reason in .error).
        """
        if self.state in (ERROR, FINISHED, None):
            raise SetuError("unexpected message", "in state %s" % self.state)
        try:
            if self._rl is not None:
                out = self._rl.receive(buf)
                self.state = self._rl.state
                return out
            if self.state == EXPECT_CONN and len(buf) >= C.HEADER_SIZE \
                    and int.from_bytes(buf[2:4], "big") == C.MSG_RL_REQUEST:
                return self._on_rl_request(buf)
            msg = M.decode(buf)
            name = TRANSITIONS.get((self.state, msg.type))
            if name is None:
                raise SetuError("unexpected message", "%s in state %s"
                                % (C.MSG_NAMES.get(msg.type), self.state))
            out = []
            getattr(self, name)(msg, out)
            if not self.lazy_output:
                out = [m for item in out for m in ((item,) if isinstance(item, bytes) else item)]
            return out
        except SetuError as e:
            self.state = ERROR
            self.error = e
            if self._rl is not None:
                self._rl.drop_flight()
            raise

    def close(self):
        """The operation is over: let go of the set and what the rateless state holds (an
        exception's traceback may keep this object alive until a full garbage collection:
        the set's arrays must not stay with it). Stats stay."""
        if self._rl is not None:
            self._rl.close()
        self.eset = self._provider = self._rx_ibf = self._full = None

    def abort(self, reason):
        """Local abort (e.g. timeout in the driver)."""
        self.state = ERROR
        self.error = SetuError(reason)
        if self._rl is not None:
            self._rl.drop_flight()

    # -- helpers -------------------------------------------------------------------------

    def _reset_round(self):
        self._inquired = set()        # salted keys we inquired about (active)
        self._offers_in = set()       # hashes offered to us
        self._offered = set()         # hashes we offered
        self._demanded_by_peer = set()
        self._my_demands = set()      # hashes we demanded, not yet received
        self._inquiries_in = set()
        self._done1_sent = False
        self._done2_sent = False
        self._peer_checksum = None

    def _check_element(self, etype, data):
        if etype != self.eset.etype:
            raise SetuError("bad element", "element type %d" % etype)
        if len(data) > C.MAX_ELEMENT_SIZE:
            raise SetuError("bad element", "too large")
        if self.eset.check is not None and not self.eset.check(data):
            raise SetuError("element rejected by application check")

    def _take_ibf(self, n):
        if self.budget is not None:
            self.budget.take("ibf_buckets", n)

    def _give_ibf(self, n):
        if self.budget is not None:
            self.budget.give("ibf_buckets", n)

    def _send_ibf(self, size, salt, out):
        self._take_ibf(size)
        try:
            ibf = self.eset.ibf(self.profile, size, salt)
            bits = counter_bits(ibf.count)
            pad = self.cfg.pad_counters
            per = max_buckets_per_message(bits, C.IBF_MSG_HEADER, pad)
            off = 0
            while off < size:
                n = min(per, size - off)
                last = off + n == size
                out.append(M.ibf_slice(last, size, off, salt, bits,
                                       ibf.write_slice(off, n, bits, pad)))
                off += n
        finally:
            self._give_ibf(size)
        self._salt = salt
        self._last_ibf_size = size
        self.stats["rounds"] += 1

    # -- handshake -----------------------------------------------------------------------

    def _on_opreq(self, msg, out):
        cfg = self.cfg
        if msg.app_id != cfg.app_id:
            raise SetuError("unknown application")
        if msg.profile not in cfg.allowed_profiles:
            raise SetuError("profile not agreed", "profile %d" % msg.profile)
        if msg.flags and not cfg.allow_force:
            raise SetuError("forced mode refused")
        if not cfg.lower_bound <= msg.element_count <= cfg.upper_bound:
            raise SetuError("byzantine bound", "remote element count %d" % msg.element_count)
        if msg.profile == C.PROFILE_RATELESS:
            # an older peer of ours: the profile now opens with an RL_REQUEST (its own
            # first flight, which the one following this request would not match)
            raise SetuError("profile not agreed", "rateless opens with RL_REQUEST")
        if self._provider is not None:
            self.eset = self._provider.for_profile(msg.profile)
        self.profile = get_profile(msg.profile)
        self.stats["profile"] = self.profile.name
        self._flags = msg.flags
        self._remote_size = msg.element_count
        self._remote_avg = msg.avg_element_size or self.eset.avg_element_size()
        n = len(self.eset)
        count = S.se_count_for(self.eset.avg_element_size(), n)
        while True:
            # Fewer estimators when the (compressed) message would pass the 64 KiB limit;
            # GNUnet sends 8 whatever the size (404,480 bytes raw).
            blob = self.eset.strata(self.profile, count).encode()
            if cfg.compress_se:
                blob = S.compress(blob)
            if len(blob) + 13 <= C.MAX_MESSAGE_SIZE or count == 1:
                break
            count //= 2
        if len(blob) + 13 > C.MAX_MESSAGE_SIZE:
            raise SetuError("strata estimator too large")
        out.append(M.strata(count, n, blob, cfg.compress_se))
        self.state = EXPECT_IBF

    def _on_rl_request(self, buf):
        """The rateless profile's opening: the same checks as an OPERATION_REQUEST's
        (application, profile, byzantine bound), then its first flight."""
        cfg = self.cfg
        version, tag, count, first = RL.parse_request(buf)
        if tag != RL.app_tag(cfg.app_id):
            raise SetuError("unknown application")
        if C.PROFILE_RATELESS not in cfg.allowed_profiles:
            raise SetuError("profile not agreed", "profile %d" % C.PROFILE_RATELESS)
        if version not in RL.RL_VERSIONS:
            raise SetuError("profile not agreed", "rateless version %d" % version)
        if not cfg.lower_bound <= count <= cfg.upper_bound:
            raise SetuError("byzantine bound", "remote element count %d" % count)
        if self._provider is not None:
            self.eset = self._provider.for_profile(C.PROFILE_RATELESS)
        self._rl = RL.RatelessMachine(self.eset, False, cfg, self.stats, count, self.budget,
                                      version)
        self._rl.expect_first_flight()
        out = self._rl.receive(first)
        self.state = self._rl.state
        return out

    def _on_se(self, msg, out):
        cfg = self.cfg
        rss = msg.set_size
        lss = len(self.eset)
        if not cfg.lower_bound <= rss <= cfg.upper_bound:
            raise SetuError("byzantine bound", "remote set size %d" % rss)
        self._remote_size = rss
        blob = S.decompress(msg.blob, msg.se_count) if msg.compressed else msg.blob
        remote = S.StrataEstimator.decode(self.profile, msg.se_count, blob)
        if rss and lss:
            lsd, rsd = self.eset.strata(self.profile, msg.se_count).estimate(remote)
        else:
            lsd, rsd = lss, rss
        # A side cannot hold more unique elements than it has (the estimator overshoots).
        lsd, rsd = min(int(round(lsd)), lss), min(int(round(rsd)), rss)
        if not policy.check_byzantine_bounds(rss, rsd, lss, lsd, cfg.lower_bound, cfg.upper_bound):
            raise SetuError("byzantine bound", "estimated differences %d/%d" % (lsd, rsd))
        # Draft 7.2: the estimates must never push a set past the upper bound.
        rsd = min(rsd, cfg.upper_bound - lss)
        lsd = min(lsd, cfg.upper_bound - rss)
        self.stats.update(lsd=lsd, rsd=rsd)
        if cfg.force == "full":
            mode = policy.FULL_LOCAL_FIRST
        elif cfg.force == "differential" and rss and lss:
            mode = policy.DIFFERENTIAL
        else:
            mode = policy.decide_operation_mode(self.eset.avg_element_size(), lss, rss, lsd, rsd,
                                                cfg.rtt)
        self.stats["mode"] = mode
        if mode == policy.FULL_LOCAL_FIRST:
            out.append(M.full_request(C.MSG_SEND_FULL, rsd, rss, lsd))
            self._send_all(out)
            self._begin_full(FULL_SENDING)
        elif mode == policy.FULL_REMOTE_FIRST:
            out.append(M.full_request(C.MSG_REQUEST_FULL, rsd, rss, lsd))
            self._begin_full(FULL_RECEIVING)
        else:
            self._send_ibf(self.profile.initial_size(lsd + rsd), 0, out)
            self.state = PASSIVE

    # -- full mode -----------------------------------------------------------------------

    def _send_all(self, out, skip=None):
        """Our elements not in `skip`, then FULL_DONE with our set's checksum (both fixed
        now), as one generator item of `out`."""
        els = self.eset.elements
        # hash order: random relative to the receiver's set (8.1.6)
        todo = [h for h in sorted(els) if skip is None or h not in skip]
        self.stats["elements_sent"] += len(todo)
        out.append(self._full_elements(todo, M.done(C.MSG_FULL_DONE, self.eset.checksum_bytes())))

    def _full_elements(self, hashes, done):
        et, els = self.eset.etype, self.eset.elements
        for h in hashes:
            yield M.full_element(et, els[h])
        yield done

    def _begin_full(self, state):
        self._full = dict(received=set(), rd=0, rf=0, lis=len(self.eset))
        self.state = state

    def _on_full_request(self, msg, out):
        cfg = self.cfg
        lss = len(self.eset)
        if msg.remote_size != lss:
            raise SetuError("implausible full sync", "claimed our size %d, have %d"
                            % (msg.remote_size, lss))
        if msg.remote_diff > cfg.upper_bound or msg.local_diff > cfg.upper_bound:
            raise SetuError("byzantine bound", "claimed differences")
        want = policy.FULL_REMOTE_FIRST if msg.type == C.MSG_REQUEST_FULL else policy.FULL_LOCAL_FIRST
        if self._flags & M.FLAG_FORCE_DIFF and lss and self._remote_size:
            raise SetuError("implausible full sync", "differential mode was forced")
        if not self._flags & M.FLAG_FORCE_FULL:
            # Re-run the initiator's decision with its numbers (its size, its average).
            got = policy.decide_operation_mode(self._remote_avg, self._remote_size, lss,
                                               msg.local_diff, msg.remote_diff, cfg.rtt)
            if got != want:
                raise SetuError("implausible full sync", "cost model says %s" % got)
        self.stats.update(mode="full_remote_first" if want == policy.FULL_LOCAL_FIRST
                          else "full_local_first")
        if msg.type == C.MSG_REQUEST_FULL:
            self._send_all(out)
            self._begin_full(FULL_SENDING)
        else:
            self._begin_full(FULL_RECEIVING)

    def _on_full_element(self, msg, out):
        f = self._full
        if msg.aetype != msg.etype:
            raise SetuError("bad element", "ae type")
        self._check_element(msg.etype, msg.data)
        h = element_hash(msg.etype, msg.data)
        if h in f["received"]:
            raise SetuError("duplicate element")
        if len(f["received"]) >= self._remote_size:
            raise SetuError("too many elements", "more than the committed %d" % self._remote_size)
        f["received"].add(h)
        if self.eset.has(h):
            f["rd"] += 1
        else:
            f["rf"] += 1
            self.eset.add(msg.data, h)
            self.stats["elements_recv"] += 1
        receiving = self.state == FULL_RECEIVING
        if not policy.full_sync_plausible(receiving, self._remote_size - f["lis"], f["lis"],
                                          f["rd"], f["rf"]):
            raise SetuError("implausible full sync",
                            "known element returned" if not receiving else "too many duplicates")

    def _on_full_done(self, msg, out):
        f = self._full
        if self.state == FULL_RECEIVING:
            if len(f["received"]) != self._remote_size:
                raise SetuError("too few elements", "%d of %d" % (len(f["received"]), self._remote_size))
            if msg.checksum != _xor_hashes(f["received"]):
                raise SetuError("final checksum mismatch")
            self._send_all(out, skip=f["received"])
        else:
            if msg.checksum != self.eset.checksum_bytes():
                raise SetuError("final checksum mismatch")
        self.state = FINISHED

    # -- IBF reception and decoding ------------------------------------------------------

    def _on_ibf(self, msg, out):
        prof, cfg = self.profile, self.cfg
        if self._flags & M.FLAG_FORCE_FULL:
            raise SetuError("implausible ibf", "full mode was forced")
        if self._rx_ibf is None:  # first slice of an IBF
            if msg.offset != 0:
                raise SetuError("bad ibf slice", "first offset %d" % msg.offset)
            size = msg.ibf_size
            if not prof.valid_size(size) or size > cfg.max_ibf_size:
                raise SetuError("implausible ibf", "size %d" % size)
            if self.state == PASSIVE:
                # A role swap: draft 8.1.5 limit, salt must advance, size at most double.
                self.stats["role_swaps"] += 1
                if self.stats["role_swaps"] > cfg.max_role_swaps:
                    raise SetuError("too many role swaps")
                if msg.salt != (self._salt + 1) & 0xFFFF:
                    raise SetuError("bad ibf slice", "salt %d after %d" % (msg.salt, self._salt))
                if size > max(prof.next_size(self._last_ibf_size), 2 * self._last_ibf_size + 1):
                    raise SetuError("implausible ibf", "size %d after %d" % (size, self._last_ibf_size))
            else:
                if msg.salt != 0:
                    raise SetuError("bad ibf slice", "first salt %d" % msg.salt)
                # Draft 8.2.3: never more than twice the byzantine upper bound, and no larger
                # than the IBF for "every element differs".
                most = prof.initial_size(min(len(self.eset) + self._remote_size, cfg.upper_bound))
                if size > most:
                    raise SetuError("implausible ibf", "size %d for sets of %d and %d"
                                    % (size, len(self.eset), self._remote_size))
            self._take_ibf(size)
            self._rx_ibf = [IBF(prof, size), msg.salt, msg.bits, 0]
        rx = self._rx_ibf
        ibf, salt, bits, filled = rx
        if msg.ibf_size != ibf.size or msg.salt != salt or msg.bits != bits:
            raise SetuError("bad ibf slice", "inconsistent header")
        if msg.offset != filled:
            raise SetuError("bad ibf slice", "offset %d, expected %d" % (msg.offset, filled))
        n = slice_bucket_count(len(msg.payload), bits, ibf.size - filled, msg.last)
        if n is None:
            raise SetuError("bad ibf slice", "length %d" % len(msg.payload))
        ibf.read_slice(filled, n, bits, msg.payload)
        rx[3] = filled + n
        if not msg.last:
            if rx[3] >= ibf.size:
                raise SetuError("bad ibf slice", "IBF complete without IBF_LAST")
            self.state = EXPECT_IBF_LAST
            return
        self._salt = salt
        self._last_ibf_size = ibf.size
        if self.stats["mode"] is None:
            self.stats["mode"] = policy.DIFFERENTIAL
        del ibf, rx   # _decode frees the table (and its charge) before any IBF it sends
        self._decode(out)

    def _decode(self, out):
        """Active decoding of local - remote (the IBF just received, self._rx_ibf); on
        failure a role swap (draft 5.2)."""
        prof, salt = self.profile, self._salt
        diff = self._rx_ibf[0]
        self._rx_ibf = None
        size = held = diff.size         # charged since its first slice
        self.state = ACTIVE
        self._reset_round()
        try:
            self._take_ibf(size)        # the local IBF, while it is subtracted
            held += size
            diff.subtract_from(self.eset.ibf(prof, size, salt))   # in place: local - remote
            lss, rss = len(self.eset), self._remote_size
            ok, pos, neg, why = diff.decode(limit=min(size, lss + rss))
        finally:
            diff = None
            self._give_ibf(held)
        offers = []
        if ok:
            for k in pos:  # must be ours: a positive key we do not hold is a false decode
                hs = self.eset.hashes_for_key(unsalt_key(k, salt))
                if not hs:
                    ok, why = False, "decoded unknown local key"
                    break
                offers += hs
        if ok:
            for k in neg:
                if self.eset.hashes_for_key(unsalt_key(k, salt)):
                    ok, why = False, "decoded known key as missing"
                    break
        if ok and len(pos) + len(neg) < abs(lss - rss):
            raise SetuError("implausible decode", "%d keys for sizes %d/%d"
                            % (len(pos) + len(neg), lss, rss))
        if not ok:
            self.stats["decode_failures"] += 1
            self.stats["last_decode_failure"] = why
            self.stats["role_swaps"] += 1
            if self.stats["role_swaps"] > self.cfg.max_role_swaps:
                raise SetuError("too many role swaps")
            nxt = prof.next_size(size)
            self._send_ibf(nxt, (salt + 1) & 0xFFFF, out)
            self.state = PASSIVE
            return
        for i in range(0, len(neg), M.MAX_KEYS_PER_INQUIRY):
            chunk = neg[i:i + M.MAX_KEYS_PER_INQUIRY]
            self._inquired.update(chunk)
            out.append(M.inquiry(salt, chunk))
        self._offered.update(offers)
        for i in range(0, len(offers), M.MAX_HASHES_PER_MESSAGE):
            out.append(M.hashes(C.MSG_OFFER, offers[i:i + M.MAX_HASHES_PER_MESSAGE]))
        out.append(M.done(C.MSG_DONE, self.eset.checksum_bytes()))
        self._done1_sent = True

    # -- differential message flow (draft 8.1.4) -----------------------------------------

    def _on_inquiry(self, msg, out):
        if msg.salt != self._salt:
            raise SetuError("bad inquiry", "salt %d, round salt %d" % (msg.salt, self._salt))
        offers = []
        for k in msg.keys:
            if k in self._inquiries_in:
                raise SetuError("duplicate inquiry")
            if len(self._inquiries_in) >= self._last_ibf_size:
                raise SetuError("too many inquiries")
            self._inquiries_in.add(k)
            for h in self.eset.hashes_for_key(unsalt_key(k, self._salt)):
                if h not in self._offered:  # unknown keys are ignored (draft 5.2)
                    offers.append(h)
        self._offered.update(offers)
        for i in range(0, len(offers), M.MAX_HASHES_PER_MESSAGE):
            out.append(M.hashes(C.MSG_OFFER, offers[i:i + M.MAX_HASHES_PER_MESSAGE]))

    def _on_offer(self, msg, out):
        demands = []
        active = self.state == ACTIVE
        for h in msg.hashes:
            if h in self._offers_in:
                raise SetuError("duplicate offer")
            if active:
                if salt_key(key_from_hash(h), self._salt) not in self._inquired:
                    raise SetuError("unrequested offer")
            elif len(self._offers_in) >= 2 * self._last_ibf_size:
                raise SetuError("too many offers")
            self._offers_in.add(h)
            if not self.eset.has(h):
                demands.append(h)
        self._my_demands.update(demands)
        for i in range(0, len(demands), M.MAX_HASHES_PER_MESSAGE):
            out.append(M.hashes(C.MSG_DEMAND, demands[i:i + M.MAX_HASHES_PER_MESSAGE]))

    def _on_demand(self, msg, out):
        et = self.eset.etype
        for h in msg.hashes:
            if h not in self._offered:
                raise SetuError("unrequested demand")
            if h in self._demanded_by_peer:
                raise SetuError("duplicate demand")
            self._demanded_by_peer.add(h)
            out.append(M.element(et, self.eset.elements[h]))
            self.stats["elements_sent"] += 1

    def _on_element(self, msg, out):
        self._check_element(msg.etype, msg.data)
        h = element_hash(msg.etype, msg.data)
        if h not in self._my_demands:
            raise SetuError("unrequested element")
        self._my_demands.discard(h)
        self.eset.add(msg.data, h)
        self.stats["elements_recv"] += 1
        self._maybe_finish(out)

    def _on_done(self, msg, out):
        if self.state == PASSIVE:          # DONE#1: the active has sent all its requests
            self.state = FINISH_WAITING
        elif self.state == ACTIVE:         # DONE#2: the passive holds the union
            if not self._done1_sent:
                raise SetuError("done before decoding finished")
            self._peer_checksum = msg.checksum
            self.state = FINISH_CLOSING
        else:                              # DONE#3 in FINISH_WAITING
            if not self._done2_sent:
                raise SetuError("unexpected message", "final DONE before ours")
            if self._my_demands:
                raise SetuError("done with unsatisfied demands")
            if msg.checksum != self.eset.checksum_bytes():
                raise SetuError("final checksum mismatch")
            self.state = FINISHED
            return
        self._maybe_finish(out)

    def _maybe_finish(self, out):
        if self._my_demands:
            return
        if self.state == FINISH_WAITING and not self._done2_sent:
            out.append(M.done(C.MSG_DONE, self.eset.checksum_bytes()))
            self._done2_sent = True
        elif self.state == FINISH_CLOSING:
            if self._peer_checksum != self.eset.checksum_bytes():
                raise SetuError("final checksum mismatch")
            out.append(M.done(C.MSG_DONE, self.eset.checksum_bytes()))
            self.state = FINISHED
