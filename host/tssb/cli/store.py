"""`tssb store check|backup|restore`: the health and safety of the host store."""
import json
import os
import sqlite3
import sys
import urllib.parse

from tssb.cli import EXIT_FAILURE, CliError, home_path, open_home, require_home


def register(subparsers):
    p = subparsers.add_parser(
        "store", help="check, repair, back up or restore the host store",
        description="The host store (tssb.db in the data directory) holds the feeds, the "
                    "identity, the peers and the network key (docs/store.md).")
    sub = p.add_subparsers(dest="store_command", metavar="ACTION")
    p.set_defaults(func=lambda _args: p.print_help(sys.stderr) or 2)

    c = sub.add_parser(
        "check", help="check integrity, chain continuity and side chains (--repair)",
        description="Check the SQLite file (integrity_check), the identity, every feed's "
                    "entries 1..newest (each verifies at its place: DMX, signature, the "
                    "previous entry's MID) and every side-chain chunk (hash chain, orphans). "
                    "Exit status 0 when all is well, 1 when problems were found. --repair "
                    "first writes a backup next to the store, then deletes the bad entries "
                    "(from the first bad one of a feed on) and bad or orphan chunks: all of "
                    "them can be fetched again from peers.")
    c.add_argument("--repair", action="store_true", help="delete what is bad (after a backup)")
    c.add_argument("--json", action="store_true", help="print the report as one JSON object")
    c.set_defaults(func=cmd_check)

    b = sub.add_parser(
        "backup", help="write a consistent copy of the store to FILE",
        description="Copy the store with SQLite's online backup: consistent even while "
                    "`tssb bridge` or `tssb serve` write to it. The copy holds the identity's "
                    "secret seed: it is created readable by you only (0600); keep it safe.")
    b.add_argument("file", metavar="FILE", help="the new backup file (must not exist)")
    b.set_defaults(func=cmd_backup)

    r = sub.add_parser(
        "restore", help="replace the store by a backup (after checking it)",
        description="Check the backup FILE, then make it the store of the data directory "
                    "(created if missing). Only tssb's own tables are restored (triggers, "
                    "views and other tables in FILE are dropped from the copy, and named). "
                    "The store it replaces is kept beside it as tssb.db.replaced-TIME (UTC). "
                    "Refused while another command (`tssb serve`, `bridge`, `web`, ...) "
                    "uses the home. Afterwards the home's own feed may be behind: `tssb "
                    "post` waits for a sync with a peer (or --force).")
    r.add_argument("file", metavar="FILE", help="a file written by `tssb store backup`")
    r.set_defaults(func=cmd_restore)


def _progress(done, total):
    if total >= 50 and (done == total or done % 50 == 0):
        sys.stderr.write("\rchecking feeds: %d/%d" % (done, total))
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _unreadable(args, home, err):
    """`check` of a store that does not open: what SQLite can still say, and the way out."""
    path = os.path.join(home, "tssb.db")
    found = []
    try:
        db = sqlite3.connect("file:%s?mode=ro" % urllib.parse.quote(path), uri=True)
        try:
            found = [r[0] for r in db.execute("PRAGMA integrity_check(20)")]
        finally:
            db.close()
    except sqlite3.Error as e:
        found = [str(e)]
    way = ("restore a backup (`tssb store restore FILE --home %s`; the damaged store is kept "
           "beside it); without one, move %s away and start again with `tssb id --import "
           "EXPORT --home %s` (an identity export) or `tssb id` (a new identity), then fetch "
           "the feeds from peers" % (home, path, home))
    found = [t for t in found if t != "ok"]
    if args.json:
        print(json.dumps({"ok": False, "opens": False, "error": str(err), "sqlite": found,
                          "way_out": way}))
    else:
        for text in found:
            print("  %-8s %s" % ("sqlite", text))
    raise CliError("the store in %s is damaged and cannot be opened (%s), which --repair "
                   "cannot mend: %s" % (home, err, way), EXIT_FAILURE)


def _print_forks(report, ctx):
    from tssb import feedforks
    for fid, seq in report.forks:
        print("  %-8s %s" % ("fork", feedforks.describe(ctx, fid, seq)))


def cmd_check(args):
    from tssb import storecheck
    home = require_home(args)
    try:
        ctx = open_home(args)
    except sqlite3.DatabaseError as e:
        return _unreadable(args, home, e)
    try:
        report = storecheck.check(ctx.store, _progress)
        repaired = None
        if args.repair and not report.ok:
            if any(k in ("sqlite", "types") for k, _, _, _ in report.problems):
                raise CliError("%s: --repair cannot mend that; restore a backup (`tssb store "
                               "restore FILE`)" % report.problems[0][3], EXIT_FAILURE)
            if ctx.store.readonly:
                raise CliError("the store in %s is read-only: --repair cannot write it; "
                               "copy it with `tssb store backup FILE`, restore that into a "
                               "writable home and repair there" % ctx.home, EXIT_FAILURE)
            saved = os.path.join(ctx.home, "tssb.db.before-repair-%d" % os.getpid())
            storecheck.backup(ctx.store, saved)
            repaired = storecheck.repair(ctx.store, report)
        if args.json:
            d = report.as_dict()
            d["readonly"] = ctx.store.readonly
            if repaired is not None:
                d["repaired"] = {"entries": repaired[0], "chunks": repaired[1],
                                 "schema_objects": len(report.foreign), "backup": saved}
            print(json.dumps(d))
        else:
            print("store %s: schema %d, %d feeds, %d entries, %d chunks, %d side chains "
                  "still incomplete%s" % (ctx.home, report.schema, report.feeds,
                                          report.entries, report.chunks, report.incomplete,
                                          " (read-only)" if ctx.store.readonly else ""))
            for kind, fid, seq, text in report.problems:
                print("  %-8s %s%s" % (kind, fid.hex()[:16] + " " if fid else "", text))
            if report.more:
                print("  ... and %d more problem(s)" % report.more)
            _print_forks(report, ctx)
            if report.forks:
                print("%d fork(s): evidence against those feeds' keys, kept; not damage to "
                      "the store" % len(report.forks))
            if report.ok:
                print("ok")
            elif repaired is not None:
                print("repaired: deleted %d entries, %d chunks and %d foreign schema "
                      "object(s) (fetch the entries again from peers); the store before the "
                      "repair is in %s" % (repaired[0], repaired[1], len(report.foreign),
                                           saved))
            elif any(k in ("sqlite", "types") for k, _, _, _ in report.problems):
                print("%d problem(s) that --repair cannot mend: restore a backup (`tssb store "
                      "restore FILE`)" % (len(report.problems) + report.more))
            else:
                print("%d problem(s): `tssb store check --repair` deletes the bad data (after "
                      "a backup), or restore a backup" % (len(report.problems) + report.more))
    finally:
        ctx.close()
    return 0 if report.ok or repaired is not None else EXIT_FAILURE


def cmd_backup(args):
    from tssb import storecheck
    path = os.path.abspath(args.file)
    ctx = open_home(args)
    try:
        if os.path.exists(path):
            raise CliError("%s exists: choose a new file name" % args.file, EXIT_FAILURE)
        storecheck.backup(ctx.store, path)
    finally:
        ctx.close()
    print("backed up %s to %s (%d bytes; it holds your secret key: keep it safe)"
          % (ctx.home, path, os.path.getsize(path)))
    return 0


def cmd_restore(args):
    from tssb import storecheck
    from tssb.homelock import HomeBusy
    home = home_path(args)
    try:
        report, kept, dropped = storecheck.restore(args.file, home)
    except storecheck.NotABackup as e:
        raise CliError(str(e), EXIT_FAILURE)
    except HomeBusy as e:
        raise CliError("not restored: %s; stop it first (a running command would keep "
                       "writing into the replaced store)" % e, EXIT_FAILURE)
    for kind, name, table in dropped:
        print("removed from the restored store (not part of a tssb store): %s %r%s"
              % (kind, name, " on %s" % table if table != name else ""), file=sys.stderr)
    print("restored %s from %s: %d feeds, %d entries%s" % (
        home, args.file, report.feeds, report.entries,
        "; the replaced store is kept as %s" % kept if kept else ""))
    print("this home's own feed may now be behind its copies elsewhere: `tssb post` waits "
          "for a sync with a peer (`tssb sync --peer HOST:PORT`), or --force",
          file=sys.stderr)
    return 0
