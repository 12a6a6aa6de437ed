"""`tssb feeds`: the feeds in the host store, one row each."""
import json

from tssb import posts
from tssb.bridge.table import render
from tssb.cli import open_home


def register(subparsers):
    p = subparsers.add_parser("feeds", help="list the feeds in the host store",
                              description="List every feed the host store holds: feed id, "
                                          "the name its author gave itself (or our peer "
                                          "label), entries, side-chain chunks, and which "
                                          "one is ours.")
    p.add_argument("--json", action="store_true", help="one JSON object per feed")
    p.set_defaults(func=run)


def feed_rows(store, own):
    """[(fid hex, entries, chunks, own?)] sorted by fid."""
    rows = []
    for fid in sorted(store.feeds()):
        n = store.front(fid)[0]
        chunks = sum(store.chunk_count(fid, s) for s in range(1, n + 1))
        rows.append((fid.hex(), n, chunks, fid == own))
    return rows


def run(args):
    ctx = open_home(args)
    try:
        rows = feed_rows(ctx.store, ctx.identity.public)
        names = posts.display_names(ctx.store)
    finally:
        ctx.close()
    if args.json:
        for fid, n, c, own in rows:
            print(json.dumps({"fid": fid, "name": names.get(bytes.fromhex(fid)),
                              "entries": n, "chunks": c, "own": own}))
        return 0
    if not rows:
        print("no feeds yet (run `tssb post TEXT` or `tssb bridge`)")
        return 0
    print(render(["FEED", "NAME", "ENTRIES", "CHUNKS", ""],
                 [(fid, names.get(bytes.fromhex(fid)) or "-", n, c, "own" if own else "")
                  for fid, n, c, own in rows]))
    return 0
