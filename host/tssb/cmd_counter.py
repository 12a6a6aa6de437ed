"""`tssb counter ...`: the elapsed-time counter (consensus on elapsed time)."""
from tssb.clock.service import store_db
import time

from tssb.cli import CliError


def _state(ctx, root_hex):
    from tssb.clock import counter as C
    from tssb.clock.repo import ThreadRepo
    try:
        root = bytes.fromhex(root_hex)
    except ValueError:
        raise CliError("counter id must be hex")
    repo = ThreadRepo(store_db(ctx.store), 128, 4)
    dag = repo.load(root)
    if root not in dag.events:
        raise CliError("unknown counter %s" % root_hex)
    st = C.CounterState(dag.events[root])
    now = int(time.time() * 1000)
    for eid in dag.order():
        if eid != root:
            try:
                st.ingest(dag.events[eid], now)
            except Exception as e:  # a rejected message: report and go on
                print("rejected %s: %s" % (eid.hex()[:12], e))
    return repo, st


def _ctx(args):
    from tssb.cmd_clock import _ctx as ctx
    return ctx(args)


def cmd_init(args):
    from tssb.clock import counter as C
    from tssb.clock.repo import ThreadRepo
    ctx = _ctx(args)
    p = C.Params(args.n, args.k, args.max_range, args.delay_ms, args.ratio, args.links)
    ev = C.initiate(ctx.identity.seed, p, int(time.time() * 1000))
    ThreadRepo(store_db(ctx.store), 128, 4).post(ev)
    print(ev.eid.hex())
    return 0


def cmd_join(args):
    from tssb.clock import counter as C
    ctx = _ctx(args)
    repo, st = _state(ctx, args.counter)
    refs = st.top() or [st.root]
    repo.post(C.participate(ctx.identity.seed, st.root, refs, int(time.time() * 1000), not args.leave))
    print("left" if args.leave else "participating")
    return 0


def cmd_show(args):
    ctx = _ctx(args)
    _, st = _state(ctx, args.counter)
    me = ctx.identity.public
    print("counter=%d increments=%d participants=%d blocked=%d next>=%d" % (
        st.value(), len(st.increments), sum(st.participants.values()), len(st.blocked),
        st.min_next_ts()))
    print("designated next: %s" % ("yes" if any(me in st.designated(e) for e in (st.top() or [st.root])) else "no"))
    return 0


def cmd_increment(args):
    from tssb.clock import counter as C
    from tssb.clock import crypto
    ctx = _ctx(args)
    repo, st = _state(ctx, args.counter)
    me = crypto.publickey(ctx.identity.seed)
    refs = [e for e in (st.top() or [st.root]) if me in st.designated(e)]
    if not refs:
        raise CliError("SELECT does not designate this feed for the next increment")
    p = st.params
    start = max(int(time.time() * 1000), max(st.msgs[r].ts for r in refs))
    gap = max(1, p.delay_ms // p.links)
    stamps = []
    for i in range(p.links):   # the hash chain: one link per gap, real waiting
        target = start + i * gap
        while int(time.time() * 1000) < target:
            time.sleep(min(0.2, (target - int(time.time() * 1000)) / 1000.0))
        stamps.append(max(target, int(time.time() * 1000)))
        print("chain link %d/%d" % (i + 1, p.links), flush=True)
    ts = max(stamps[-1], max(st.msgs[r].ts for r in refs) + p.delay_ms,
             st.init.ts + (st.expected_stamp(refs, me).value()) * p.delay_ms)
    while int(time.time() * 1000) < ts:
        time.sleep(0.05)
    ev = C.make_increment(ctx.identity.seed, st, refs, stamps, ts)
    st.ingest(ev, int(time.time() * 1000))   # our own rules first
    repo.post(ev)
    print("counter now %d (%s)" % (st.value(), ev.eid.hex()))
    return 0


def register(subparsers):
    p = subparsers.add_parser("counter", help="elapsed-time counter (Bloom clock consensus)",
                              description="Create, join, increment and read a global "
                                          "elapsed-time counter; its messages sync with "
                                          "`tssb clock sync --mode threads`.")
    p.add_argument("--home", help="data directory (default $TSSB_HOME or ~/.tssb)")
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
                          ("show", cmd_show, "counter value and whether we are designated"),
                          ("increment", cmd_increment, "wait out the delay, then increment")):
        s = sub.add_parser(name, help=hlp)
        s.add_argument("counter", help="counter id (hex)")
        if name == "join":
            s.add_argument("--leave", action="store_true", help="stop participating")
        s.set_defaults(func=fn)
    p.set_defaults(func=lambda a: p.print_help() or 2)
