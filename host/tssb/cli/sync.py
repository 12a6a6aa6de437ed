"""`tssb sync --peer HOST:PORT`: reconcile this host's store with another host over SETU."""
import json
import sys

from tssb import feedforks, ownfeed, synclog
from tssb.addr import format_addr
from tssb.cli import EXIT_FAILURE, CliError, open_home, peer_address, run_async, \
    session_failure
from tssb.session.budget import Limits, Pool

# What a SETU failure means for the user, by its reason (the detail names protocol
# states: for -vv logs, not for this line).
SETU_WORDS = {
    "peer closed": "the peer ended the session before the sync was done (it stopped, or "
                   "refused what we sent: its log says why)",
    "timeout": "no message from the peer for %(timeout)g s (raise --timeout on a slow link)",
    "unexpected message": "the peer sent a message out of turn (another tssb version?)",
}


def setu_words(e, timeout):
    """One readable clause for a SetuError."""
    words = SETU_WORDS.get(e.reason)
    return words % {"timeout": timeout} if words else e.reason


def register(subparsers):
    p = subparsers.add_parser(
        "sync", help="reconcile the local store with another host (SETU set union)",
        description="Open a secure session to a peer running `tssb serve` and reconcile both "
                    "stores with SETU (draft-summermatter-set-union-01). Both hosts end with "
                    "the union of their log entries; every received entry is signature-checked. "
                    "Progress goes to stderr; Ctrl-C stops at once (what was received is kept).")
    p.add_argument("--peer", required=True, metavar="HOST:PORT", help="the peer's `tssb serve` address")
    p.add_argument("--profile", choices=("rateless", "tssb2", "gnunet"), default="rateless",
                   help="rateless (default: coded symbols, 1-2 round trips, state kept in the "
                        "store; tries tssb2 once if its symbols never decode or the peer refuses it), tssb2 (estimator + IBFs, GNUnet's flaws fixed) or gnunet "
                        "(GNUnet-identical IBFs)")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds to wait for any one message (default 60)")
    p.add_argument("--max-unverified", type=int, default=Limits().session["unverified"],
                   metavar="N",
                   help="received elements held before they can be checked against their "
                        "feed (default %(default)d; about 0.8 KiB each); a peer sending more "
                        "is cut off")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(func=run)


def run(args):
    host, port = peer_address(args.peer)
    if not args.timeout > 0:
        raise CliError("--timeout must be positive")
    from tssb import session
    from tssb.channel import ChannelClosed
    from tssb.setu import constants as C
    from tssb.setu.driver import reconcile
    from tssb.setu.errors import SetuError
    from tssb.setu.machine import Config
    from tssb.setu.rateless import NEVER_DECODES
    from tssb.setu.rateless_store import StoreSets
    from tssb.setu.service import summary_fields

    if args.max_unverified < 1:
        raise CliError("--max-unverified must be at least 1")
    pid = {name: p for p, name in C.PROFILE_NAMES.items()}[args.profile]
    ctx = open_home(args)
    try:
        peer_key = ctx.store.peer_by_addr(format_addr(host, port))
        if peer_key is None:
            raise CliError("%s: no peer known at this address: add it with `tssb peer add "
                           "KEY --addr %s` (KEY: what `tssb id` shows there)"
                           % (args.peer, args.peer), EXIT_FAILURE)
        own = ctx.identity.public
        own_before = ctx.store.front(own)[0] if ctx.store.has_feed(own) else 0
        forks_before = {(f, q) for f, q, _ in ctx.store.forks()}

        def progress(st):
            print("  sent %d, received %d elements so far" % (
                st["elements_sent"], st["elements_recv"]), file=sys.stderr)

        async def go(eset, cfg, budget):
            sess = await session.connect(host, port, ctx, peer=peer_key, budget=budget)
            try:
                ch = await sess.open_stream("setu")
                synclog.start(ctx.events, "setu", peer_key)
                return await reconcile(ch, eset, True, cfg, progress, args.timeout)
            finally:
                await sess.close()

        def failed(reason):
            ctx.events.emit("sync_done", **summary_fields(peer_key, dict(ok=False,
                                                                         reason=reason)))

        def attempt(pid):   # a session's budget ends with it: each attempt has its own
            budget = Pool(Limits(unverified=args.max_unverified)).budget()
            sets = StoreSets(ctx.store, budget)
            try:
                eset = sets.for_profile(pid)    # rateless: only what was appended is hashed
                print("local set: %d elements (%s); connecting to %s" % (
                    len(eset), "%d new since the kept state" % sets.refreshed
                    if pid == C.PROFILE_RATELESS else "entries and chunks",
                    format_addr(host, port)), file=sys.stderr)
                res = run_async(go(eset, Config(profile_id=pid), budget))
                sets.finish()                   # index what arrived: the next sync starts at once
                return res
            finally:
                sets.release()

        try:
            try:
                res = attempt(pid)
            except SetuError as e:
                # Coded symbols that never decode are rare (a stream far below the
                # difference, or a false purity: 2^-24 per checksum test) and repeat for
                # the same two sets: one try with the estimator and IBFs, which do not.
                # A peer that closes at the RL_REQUEST without a word is an older host of
                # ours (an unknown message type to it) or one that does not allow the
                # profile: it speaks tssb2.
                refused = e.reason == "peer closed" and getattr(e, "unanswered", False)
                if pid != C.PROFILE_RATELESS or not (e.reason == NEVER_DECODES or refused):
                    raise
                failed(e.reason)
                if refused:
                    print("the peer closed at the rateless request (an older host, or the "
                          "profile not allowed); trying again with profile tssb2",
                          file=sys.stderr)
                else:
                    print("rateless sync did not decode (%s); trying again with profile "
                          "tssb2" % e, file=sys.stderr)
                pid = C.PROFILE_TSSB2
                res = attempt(pid)
                res["fallback_from"] = "rateless"
                res["fallback_reason"] = "refused" if refused else NEVER_DECODES
        except SetuError as e:
            failed(e)
            raise CliError("sync with %s failed: %s" % (args.peer, setu_words(e, args.timeout)),
                           EXIT_FAILURE)
        except KeyboardInterrupt:
            failed("interrupted")
            raise
        except (OSError, ValueError, ChannelClosed, session.ProtocolError,
                session.StreamRefused) as e:
            failed(e)
            raise session_failure(e, args.peer)
        outstanding = res.get("peer_outstanding") or 0
        if outstanding:    # the peer confirmed it could not store all we sent
            res.update(ok=False, reason="peer outstanding")
        ctx.events.emit("sync_done", **summary_fields(peer_key, res))
        own_after = ctx.store.front(own)[0] if ctx.store.has_feed(own) else 0
        if not outstanding and ownfeed.confirm(ctx.store):
            print("this home's own feed is confirmed by %s (seq %d%s): posting is open again"
                  % (args.peer, own_after, ", was %d here" % own_before
                     if own_after != own_before else ""), file=sys.stderr)
        forks = sorted({(f, q) for f, q, _ in ctx.store.forks()} - forks_before)
        for fid, seq in forks:
            print("fork: " + feedforks.describe(ctx, fid, seq), file=sys.stderr)
    finally:
        ctx.close()
    if args.json:
        print(json.dumps(dict(res, peer=args.peer, peer_key=peer_key.hex(),
                              forks=[{"feed": f.hex(), "seq": q} for f, q in forks])))
    if outstanding:
        why = ("they wait there for entries it lacks, or were dropped; run the sync again"
               if not forks else "the fork above is one: the peer keeps it as evidence and "
               "never stores a second entry for a seq")
        raise CliError("sync with %s incomplete: the peer has not stored %d of the %d elements "
                       "we sent (%s)" % (args.peer, outstanding, res["elements_sent"], why),
                       EXIT_FAILURE)
    if args.json:
        return 0
    if pid == C.PROFILE_RATELESS:
        print("profile rateless, %d symbols sent, %d received, %d round trip(s)%s%s"
              % (res["symbols_sent"], res["symbols_recv"], res["round_trips"],
                 ", prefix extended to %d" % res["prefix"] if res["prefix_extended"] else "",
                 ", fell back to a full key exchange" if res["fallback"] else ""))
    else:
        print("mode %s (profile %s%s), %d IBF round(s), %d decode failure(s)"
              % (res["mode"], res["profile"],
                 "" if not res.get("fallback_from") else ", after rateless was refused"
                 if res.get("fallback_reason") == "refused" else ", after rateless did not decode",
                 res["rounds"], res["decode_failures"]))
    print("bytes: %d sent, %d received; elements: %d sent, %d received"
          % (res["bytes_sent"], res["bytes_recv"], res["elements_sent"], res["elements_recv"]))
    return 0
