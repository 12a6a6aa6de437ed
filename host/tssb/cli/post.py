"""`tssb post TEXT`: append an entry to the host's own feed."""
from tssb.bridge.hostnode import HostNode
from tssb.cli import CliError, open_home


def register(subparsers):
    p = subparsers.add_parser(
        "post", help="append TEXT to the host's own feed",
        description="Author a signed tinySSB entry on the host's own feed (content longer "
                    "than fits in one 120-byte entry goes into a side chain). `tssb bridge` "
                    "then replicates it to boards and peers.")
    p.add_argument("text", metavar="TEXT", help="the content (UTF-8)")
    p.set_defaults(func=run)


def run(args):
    content = args.text.encode("utf-8")
    if not content:
        raise CliError("nothing to post: TEXT is empty")
    ctx = open_home(args)
    try:
        h = HostNode(ctx.store, ctx.identity, ctx.events)
        try:
            seq = h.post(content)
        except ValueError as e:
            raise CliError("cannot post: %s" % e)
        chunks = ctx.store.chunk_count(ctx.identity.public, seq)
    finally:
        ctx.close()
    print("posted seq %d on %s (%d bytes%s)" % (
        seq, ctx.identity.public.hex()[:16], len(content),
        ", side chain of %d chunks" % chunks if chunks else ""))
    return 0
