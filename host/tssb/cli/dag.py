"""`tssb dag`: post to, show and sync application DAGs (trDAG set replication trees)."""
import json
import sys
import time

from tssb.cli import EXIT_FAILURE, CliError, open_home, peer_address, run_async, \
    session_failure


def register(subparsers):
    p = subparsers.add_parser(
        "dag", help="application DAGs (tangles): post, show, sync with trDAG",
        description="Messages of one application object form a DAG rooted at one message; "
                    "'sync' reconciles a DAG with a peer in few rounds and bytes "
                    "(set replication trees, docs/trdag.md).")
    sub = p.add_subparsers(dest="dag_command", metavar="ACTION")

    sp = sub.add_parser("post", help="post a message (a new DAG if --root is omitted)",
                        description="Append a DAG message to your feed referencing the "
                                    "DAG's current tips. Without --root it creates a new DAG "
                                    "and prints the new root ID.")
    sp.add_argument("--root", metavar="ID", help="root ID (40 hex digits) of the DAG")
    sp.add_argument("text", help="message text (UTF-8, at most 1024 bytes)")
    sp.add_argument("--force", action="store_true",
                    help="post while this home's own feed may be behind (after a restore "
                         "or an identity import, until a sync with a peer)")
    sp.add_argument("--json", action="store_true", help="print the result as one JSON object")
    sp.set_defaults(func=cmd_post)

    sp = sub.add_parser("show", help="list a DAG's messages by depth",
                        description="Print the messages of the DAG rooted at ROOT, by depth.")
    sp.add_argument("root", metavar="ROOT", help="root ID (40 hex digits); 'list' shows roots")
    sp.add_argument("--json", action="store_true", help="one JSON object per message (root)")
    sp.set_defaults(func=cmd_show)

    sp = sub.add_parser("sync", help="reconcile a DAG with a peer over a secure session",
                        description="Reconcile the DAG ROOT with the tssb server at HOST:PORT "
                                    "and print rounds, bytes and messages each way.")
    sp.add_argument("--peer", required=True, metavar="HOST:PORT")
    sp.add_argument("--root", required=True, metavar="ID")
    sp.add_argument("--variant", choices=["basic", "fast", "naive"], default="fast",
                    help="basic: one tree level per round (spec); fast (default): 3 levels "
                         "per round, ID lists below 8 messages; naive: send all IDs")
    sp.add_argument("--levels", type=int, help="tree levels per round (overrides --variant)")
    sp.add_argument("--cutoff", type=int, help="list IDs when both counts <= this")
    sp.add_argument("--json", action="store_true", help="print the result as one JSON object")
    sp.set_defaults(func=cmd_sync)


MIN_ROOT_PREFIX = 8    # hex digits, as for feeds (tssb.cli.MIN_FEED_PREFIX)
PROGRESS_EVERY_S = 1.0  # progress lines of `dag sync` when stderr is not a terminal


def _root(text, index=None):
    """The 20-byte root ID `text` names: 40 hex digits or, with the index, a unique
    prefix of 8+ hex digits of a root held here. Raises: CliError."""
    t = text.lower()
    if not t or any(c not in "0123456789abcdef" for c in t) or len(t) > 40:
        raise CliError("a root ID is 40 hex digits (or a unique prefix of %d+), got %r"
                       % (MIN_ROOT_PREFIX, text))
    if len(t) == 40:
        return bytes.fromhex(t)
    if index is None or len(t) < MIN_ROOT_PREFIX:
        raise CliError("a root ID is 40 hex digits%s, got %r" % (
            "" if index is None else " or a unique prefix of %d+" % MIN_ROOT_PREFIX, text))
    hits = [bytes(r) for r in index.roots() if bytes(r).hex().startswith(t)]
    if len(hits) != 1:
        raise CliError("%s DAG roots here start with %s (`tssb dag show list`)"
                       % (len(hits) or "no", text), EXIT_FAILURE if not hits else 2)
    return hits[0]


def _open(args):
    from tssb.trdag.service import open_index
    ctx = open_home(args)
    return ctx, open_index(ctx)


def _author(ctx):
    from tinyssb import entry
    fid = ctx.identity.public
    if ctx.store.has_feed(fid):
        seq, prev = ctx.store.front(fid)
    else:
        seq, prev = 0, entry.genesis_prev(fid)
    return entry.Author(fid, ctx.identity.sign, seq, prev)


def cmd_post(args):
    from tssb import ownfeed
    from tssb.trdag import dagstore
    from tssb.trdag.errors import TrdagError
    if len(args.text.encode("utf-8")) > 1024:
        raise CliError("text longer than 1024 bytes")
    ctx, index = _open(args)
    try:
        root = _root(args.root, index) if args.root else None
        try:
            ownfeed.check_front(ctx.store, args.force)
        except ownfeed.FeedBehind as e:
            raise CliError("refused: %s" % e, EXIT_FAILURE)
        # the front is read and the entry appended in one write transaction: posts of
        # other processes on this home go before or after, never in between
        with ctx.store.transaction():
            msg = dagstore.post(index, _author(ctx), root, args.text, feeds=ctx.store)
    except TrdagError as e:
        if e.reason == "unknown_root":
            raise CliError("cannot post: no DAG with root %s here (`tssb dag show list`; "
                           "`tssb dag sync` fetches one from a peer)" % args.root, EXIT_FAILURE)
        raise CliError("cannot post: %s" % e, EXIT_FAILURE)
    finally:
        ctx.close()
    if args.json:
        print(json.dumps({"mid": msg.mid.hex(), "depth": msg.depth,
                          "root": (root or msg.mid).hex(), "new_root": root is None}))
        return 0
    print("%s depth %d%s" % (msg.mid.hex(), msg.depth, " (new root)" if root is None else ""))
    return 0


def cmd_show(args):
    ctx, index = _open(args)
    try:
        _show(args, index, ctx)
    finally:
        ctx.close()
    return 0


def _show(args, index, ctx):
    if args.root == "list":
        for r in index.roots():
            if args.json:
                print(json.dumps({"root": r.hex(), "messages": len(index.members(r))}))
            else:
                print("%s %d messages" % (r.hex(), len(index.members(r))))
        return
    root = _root(args.root, index)
    r = index.get(root)
    if r is None:
        raise CliError("no DAG with root %s here (`tssb dag show list`; `tssb dag sync` "
                       "fetches one from a peer)" % args.root, EXIT_FAILURE)
    members = sorted(index.members(root))
    if args.json:
        for d, mid in members:
            m = index.get(mid)
            print(json.dumps({"depth": d, "mid": mid.hex(), "fid": m.fid.hex(),
                              "text": m.text}))
        return
    print("root %s by %s: %s" % (root.hex(), r.fid.hex()[:16], r.text))
    for d, mid in members:
        m = index.get(mid)
        print("%6d %s %s %s" % (d, mid.hex()[:16], m.fid.hex()[:16], m.text))
    tips = index.tips(root)
    print("%d messages, max depth %d, %d tips" % (len(members), members[-1][0] if members else 0,
                                                 len(tips)))


def cmd_sync(args):
    from tssb.channel import ChannelClosed
    from tssb.session import StreamRefused
    from tssb.trdag import dagstore, session as ts
    from tssb.trdag.errors import TrdagError
    from tssb.trdag.service import run_logged
    host, port = peer_address(args.peer)
    base = ts.VARIANTS[args.variant]
    opt = ts.Options(base.mode, args.levels or base.levels,
                     base.cutoff if args.cutoff is None else args.cutoff)
    try:
        opt.check()
    except TrdagError:
        raise CliError("--levels must be 1..%d and --cutoff 0..%d" % (ts.MAX_LEVELS, ts.MAX_CUTOFF))
    ctx, index = _open(args)
    try:
        root = _root(args.root, index)    # a prefix names a DAG held here
    except CliError:
        ctx.close()
        raise
    tty = sys.stderr.isatty()
    shown = {"at": time.monotonic(), "tty": False}

    def progress(st):
        # a terminal gets one line redrawn; a log file a line a second at most
        line = "  received %d messages so far (%d frames)" % (st.elements_recv, st.msgs_recv)
        if tty:
            print("\r" + line, end="", flush=True, file=sys.stderr)
            shown["tty"] = True
        elif time.monotonic() - shown["at"] >= PROGRESS_EVERY_S:
            shown["at"] = time.monotonic()
            print(line, file=sys.stderr, flush=True)

    async def go():
        from tssb import session as tsession
        try:
            sess = await tsession.connect(host, port, ctx)
        except (OSError, ValueError, tsession.ProtocolError) as e:
            raise session_failure(e, args.peer)
        try:
            ch = await sess.open_stream("trdag")
            s = ts.SyncSession(dagstore.Dag(index, ctx.store), root, True, opt)
            peer = getattr(sess, "peer", args.peer)
            try:
                return s, await run_logged(ch, ctx, peer, s, progress)
            finally:
                ch.close()
        finally:
            await sess.close()

    try:
        s, st = run_async(go())
    except TrdagError as e:
        raise CliError("sync failed: %s" % e, EXIT_FAILURE)
    except (ChannelClosed, StreamRefused) as e:
        raise session_failure(e, args.peer)
    finally:
        ctx.close()
        if shown["tty"]:
            print("\r\033[K", end="", file=sys.stderr, flush=True)   # the result follows
    if args.json:
        print(json.dumps({"root": root.hex(), "variant": opt.name(), "ok": True,
                          "rounds": st.rounds, "bytes_sent": st.bytes_sent,
                          "bytes_recv": st.bytes_recv, "elements_sent": st.elements_sent,
                          "elements_recv": st.elements_recv,
                          "recon_bytes_sent": st.recon_bytes_sent,
                          "recon_bytes_recv": st.recon_bytes_recv,
                          "duration_ms": st.duration_ms}))
        return 0
    print("sync %s ok (%s): %d rounds; sent %d bytes / %d messages; received %d bytes / "
          "%d messages; reconciliation %d+%d bytes; %d ms"
          % (root.hex()[:16], opt.name(), st.rounds, st.bytes_sent, st.elements_sent,
             st.bytes_recv, st.elements_recv, st.recon_bytes_sent, st.recon_bytes_recv,
             st.duration_ms))
    return 0
