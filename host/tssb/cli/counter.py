"""`tssb counter ...`: the elapsed-time counter (consensus on elapsed time)."""
import json
import sys
import time

from tssb.cli import EXIT_FAILURE, CliError
from tssb.clock.service import store_db


def _now():
    return int(time.time() * 1000)


def _when(ms):
    return "%s.%03d" % (time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms // 1000)), ms % 1000)


def _rule(e):
    """A refusal in words: the reason, the rule behind it and any hint."""
    from tssb.clock import counter as C
    reason = getattr(e, "reason", str(e))
    text = "%s (%s)" % (reason, C.RULES[reason]) if reason in C.RULES else reason
    return text + (": %s" % e.detail if getattr(e, "detail", None) else "")


def _repo(ctx):
    from tssb.clock.repo import ThreadRepo
    return ThreadRepo(store_db(ctx.store), 128, 4)


def _state(ctx, root_hex):
    try:
        root = bytes.fromhex(root_hex)
    except ValueError:
        raise CliError("counter id must be hex")
    repo = _repo(ctx)
    st = repo.counter(root)
    if st is None:
        raise CliError("unknown counter %s (`tssb clock sync --mode threads` fetches the "
                       "counters peers follow)" % root_hex, EXIT_FAILURE)
    for ev, e in repo.rejected(root):   # stored before verification existed, or tampered
        print("rejected stored message %s: %s" % (ev.eid.hex()[:12], _rule(e)))
    return repo, st


def _in_home(fn):
    """The command fn(args, ctx) with the home open, and closed whatever happens."""
    def run(args):
        from tssb.cli import open_home
        ctx = open_home(args)
        try:
            return fn(args, ctx)
        finally:
            ctx.close()
    return run


@_in_home
def cmd_init(args, ctx):
    from tssb.clock import counter as C
    from tssb.clock.errors import ClockError
    try:
        p = C.Params(args.n, args.k, args.max_range, args.delay_ms, args.ratio, args.links)
    except ClockError as e:
        raise CliError("bad counter parameters (%s)" % e)
    ev = C.initiate(ctx.identity.seed, p, _now())
    _repo(ctx).post(ev)
    print(ev.eid.hex())
    return 0


@_in_home
def cmd_join(args, ctx):
    from tssb.clock import counter as C
    from tssb.clock.errors import ClockError
    repo, st = _state(ctx, args.counter)
    refs = st.top() or [st.root]
    try:
        fate = repo.post(C.participate(ctx.identity.seed, st.root, refs, _now(), not args.leave))
    except ClockError as e:
        raise CliError("refused: %s" % _rule(e), EXIT_FAILURE)
    print("left" if args.leave else "participating")
    if fate == "held":
        print("held back (Rule 2 temporary block: we are a designated incrementer past %s); "
              "propagated once the next increment is in" % _when(st.min_next_ts()))
    return 0


@_in_home
def cmd_show(args, ctx):
    from tssb.clock import counter as C
    repo, st = _state(ctx, args.counter)
    me = ctx.identity.public
    blocked = repo.blocked(st.root)
    held = repo.held(st.root)
    designated = any(me in st.designated(e) for e in (st.top() or [st.root]))
    if args.json:
        print(json.dumps({
            "counter": st.value(), "increments": len(st.increments),
            "participants": sum(st.participants.values()), "next_ts": st.min_next_ts(),
            "designated": designated,
            "blocked": [{"author": a.hex(), "reason": r, "event": e.hex() if e else None,
                         "ts": ts} for a, r, e, ts in blocked],
            "held": [{"event": ev.eid.hex(), "author": ev.author.hex(), "ts": ev.ts}
                     for ev in held]}))
        return 0
    print("counter=%d increments=%d participants=%d blocked=%d held=%d next increment from %s" % (
        st.value(), len(st.increments), sum(st.participants.values()), len(blocked), len(held),
        _when(st.min_next_ts())))
    print("designated next: %s" % ("yes" if designated else "no"))
    for author, reason, eid, ts in blocked:
        print("blocked %s reason=%s (%s) event=%s at %s" % (
            author.hex(), reason, C.RULES.get(reason, "?"), eid.hex()[:12] if eid else "-", _when(ts)))
    for ev in held:
        print("held %s from %s ts=%s (Rule 2 temporary block)" % (
            ev.eid.hex()[:12], ev.author.hex()[:16], _when(ev.ts)))
    return 0


@_in_home
def cmd_increment(args, ctx):
    from tssb.clock import counter as C
    from tssb.clock.errors import ClockError, CounterError
    repo, st = _state(ctx, args.counter)
    me = ctx.identity.public
    try:   # the rules that waiting cannot fix, before we spend T building the chain
        refs, earliest = st.plan(me, _now())
    except CounterError as e:
        raise CliError("refused: %s" % _rule(e), EXIT_FAILURE)
    p = st.params
    start = max(_now(), max(st.msgs[r].ts for r in refs))
    gap = max(1, p.delay_ms // p.links)
    chain_end = start + (p.links - 1) * gap
    if earliest > chain_end and not args.wait:
        raise CliError("refused: too_early (%s): allowed from %s (in %d s); rerun then or use "
                       "--wait" % (C.RULES["too_early"], _when(earliest),
                                   max(1, (earliest - _now() + 999) // 1000)), EXIT_FAILURE)
    print("designated; earliest timestamp %s; building the hash chain (%d links, ~%d s)" % (
        _when(earliest), p.links, (chain_end - start) // 1000), flush=True, file=sys.stderr)
    stamps = []
    target = start
    for i in range(p.links):   # the hash chain: one link per gap, real waiting
        while _now() < target:
            time.sleep(min(0.2, (target - _now()) / 1000.0))
        stamps.append(max(target, _now()))
        target = stamps[-1] + gap   # from the link taken: oversleeping must not shrink a gap
        print("chain link %d/%d" % (i + 1, p.links), flush=True, file=sys.stderr)
    ts = max(stamps[-1], earliest)
    while _now() < ts:
        time.sleep(min(0.2, (ts - _now()) / 1000.0))
    ev = C.make_increment(ctx.identity.seed, st, refs, stamps, ts)
    try:
        repo.post(ev)   # verified against the rules first; a refusal stores nothing
    except ClockError as e:
        raise CliError("refused: %s" % _rule(e), EXIT_FAILURE)
    print("counter now %d (%s)" % (repo.counter(st.root).value(), ev.eid.hex()))
    return 0


def register(subparsers):
    p = subparsers.add_parser("counter", help="elapsed-time counter (Bloom clock consensus)",
                              description="Create, join, increment and read a global "
                                          "elapsed-time counter; its messages sync with "
                                          "`tssb clock sync --mode threads`.")
    sub = p.add_subparsers(dest="counter_cmd", metavar="ACTION")
    i = sub.add_parser("init", help="create a counter; prints its id")
    i.add_argument("--n", type=int, default=64, help="clock cells (default %(default)s)")
    i.add_argument("--k", type=int, default=2, help="cells per incrementer (default %(default)s)")
    i.add_argument("--max-range", type=int, default=16, help="max cell spread (default %(default)s)")
    i.add_argument("--delay-ms", type=int, default=60000, help="minimum delay T (default %(default)s)")
    i.add_argument("--ratio", type=int, default=4, help="SELECT ratio R (default %(default)s)")
    i.add_argument("--links", type=int, default=6, help="hash-chain links (default %(default)s)")
    i.set_defaults(func=cmd_init)
    for name, fn, hlp in (("join", cmd_join, "commit to participate (--leave to stop)"),
                          ("show", cmd_show, "counter value, whether we are designated, "
                                             "blocked authors and held messages"),
                          ("increment", cmd_increment, "check the rules, wait out the delay, "
                                                       "then increment")):
        s = sub.add_parser(name, help=hlp)
        s.add_argument("counter", help="counter id (hex)")
        if name == "show":
            s.add_argument("--json", action="store_true", help="print one JSON object")
        if name == "join":
            s.add_argument("--leave", action="store_true", help="stop participating")
        if name == "increment":
            s.add_argument("--wait", action="store_true",
                           help="wait when the minimum delay ends after the hash chain would")
        s.set_defaults(func=fn)
    p.set_defaults(func=lambda a: p.print_help() or 2)
