"""`tssb dag`: post to, show and sync application DAGs (trDAG set replication trees)."""
import json
import sys

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


def _root(text):
    try:
        b = bytes.fromhex(text)
    except ValueError:
        b = b""
    if len(b) != 20:
        raise CliError("a root ID is 40 hex digits, got %r" % text)
    return b


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
    from tssb.trdag import dagstore
    from tssb.trdag.errors import TrdagError
    root = _root(args.root) if args.root else None
    if len(args.text.encode("utf-8")) > 1024:
        raise CliError("text longer than 1024 bytes")
    ctx, index = _open(args)
    try:
        msg = dagstore.post(index, _author(ctx), root, args.text, feeds=ctx.store)
    except TrdagError as e:
        raise CliError("cannot post: %s" % e)
    if args.json:
        print(json.dumps({"mid": msg.mid.hex(), "depth": msg.depth,
                          "root": (root or msg.mid).hex(), "new_root": root is None}))
        return 0
    print("%s depth %d%s" % (msg.mid.hex(), msg.depth, " (new root)" if root is None else ""))
    return 0


def cmd_show(args):
    ctx, index = _open(args)
    if args.root == "list":
        for r in index.roots():
            if args.json:
                print(json.dumps({"root": r.hex(), "messages": len(index.members(r))}))
            else:
                print("%s %d messages" % (r.hex(), len(index.members(r))))
        return 0
    root = _root(args.root)
    r = index.get(root)
    if r is None:
        raise CliError("unknown root %s" % args.root)
    members = sorted(index.members(root))
    if args.json:
        for d, mid in members:
            m = index.get(mid)
            print(json.dumps({"depth": d, "mid": mid.hex(), "fid": m.fid.hex(),
                              "text": m.text}))
        return 0
    print("root %s by %s: %s" % (root.hex(), r.fid.hex()[:16], r.text))
    for d, mid in members:
        m = index.get(mid)
        print("%6d %s %s %s" % (d, mid.hex()[:16], m.fid.hex()[:16], m.text))
    tips = index.tips(root)
    print("%d messages, max depth %d, %d tips" % (len(members), members[-1][0] if members else 0,
                                                 len(tips)))
    return 0


def cmd_sync(args):
    from tssb.channel import ChannelClosed
    from tssb.session import StreamRefused
    from tssb.trdag import dagstore, session as ts
    from tssb.trdag.errors import TrdagError
    from tssb.trdag.service import run_logged
    root = _root(args.root)
    host, port = peer_address(args.peer)
    base = ts.VARIANTS[args.variant]
    opt = ts.Options(base.mode, args.levels or base.levels,
                     base.cutoff if args.cutoff is None else args.cutoff)
    try:
        opt.check()
    except TrdagError:
        raise CliError("--levels must be 1..%d and --cutoff 0..%d" % (ts.MAX_LEVELS, ts.MAX_CUTOFF))
    ctx, index = _open(args)

    st_shown = [False]

    def progress(st):
        st_shown[0] = True
        print("\r  %d frames in, %d messages received" % (st.msgs_recv, st.elements_recv),
              end="", flush=True, file=sys.stderr)

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
        if st_shown[0]:
            print(file=sys.stderr)
    if args.json:
        print(json.dumps({"root": args.root, "variant": opt.name(), "ok": True,
                          "rounds": st.rounds, "bytes_sent": st.bytes_sent,
                          "bytes_recv": st.bytes_recv, "elements_sent": st.elements_sent,
                          "elements_recv": st.elements_recv,
                          "recon_bytes_sent": st.recon_bytes_sent,
                          "recon_bytes_recv": st.recon_bytes_recv,
                          "duration_ms": st.duration_ms}))
        return 0
    print("sync %s ok (%s): %d rounds; sent %d bytes / %d messages; received %d bytes / "
          "%d messages; reconciliation %d+%d bytes; %d ms"
          % (args.root[:16], opt.name(), st.rounds, st.bytes_sent, st.elements_sent,
             st.bytes_recv, st.elements_recv, st.recon_bytes_sent, st.recon_bytes_recv,
             st.duration_ms))
    return 0
