"""`tssb store check|backup|restore`: the health and safety of the host store."""
import json
import os
import sqlite3
import sys

from tssb.cli import EXIT_FAILURE, CliError, home_path, open_home


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
                    "(created if missing). The store it replaces is kept beside it as "
                    "tssb.db.replaced-TIME. Stop `tssb bridge` and `tssb serve` first.")
    r.add_argument("file", metavar="FILE", help="a file written by `tssb store backup`")
    r.set_defaults(func=cmd_restore)


def _progress(done, total):
    if total >= 50 and (done == total or done % 50 == 0):
        sys.stderr.write("\rchecking feeds: %d/%d" % (done, total))
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _open_for_check(args):
    try:
        return open_home(args)
    except sqlite3.DatabaseError as e:
        raise CliError("the store in %s cannot be read at all (%s): restore a backup with "
                       "`tssb store restore FILE`" % (home_path(args), e), EXIT_FAILURE)


def cmd_check(args):
    from tssb import storecheck
    ctx = _open_for_check(args)
    try:
        report = storecheck.check(ctx.store, _progress)
        repaired = None
        if args.repair and not report.ok:
            if any(k == "sqlite" for k, _, _, _ in report.problems):
                raise CliError("SQLite itself reports damage: repair cannot fix that; restore "
                               "a backup (`tssb store restore FILE`)", EXIT_FAILURE)
            saved = os.path.join(ctx.home, "tssb.db.before-repair-%d" % os.getpid())
            storecheck.backup(ctx.store, saved)
            repaired = storecheck.repair(ctx.store, report)
    finally:
        ctx.close()
    if args.json:
        d = report.as_dict()
        if repaired is not None:
            d["repaired"] = {"entries": repaired[0], "chunks": repaired[1], "backup": saved}
        print(json.dumps(d))
    else:
        print("store %s: schema %d, %d feeds, %d entries, %d chunks, %d side chains still "
              "incomplete" % (ctx.home, report.schema, report.feeds, report.entries,
                              report.chunks, report.incomplete))
        for kind, fid, seq, text in report.problems:
            print("  %-8s %s%s" % (kind, fid.hex()[:16] + " " if fid else "", text))
        if report.more:
            print("  ... and %d more problem(s)" % report.more)
        if report.ok:
            print("ok")
        elif repaired is not None:
            print("repaired: deleted %d entries and %d chunks (fetch them again from peers); "
                  "the store before the repair is in %s" % (repaired[0], repaired[1], saved))
        else:
            print("%d problem(s): `tssb store check --repair` deletes the bad data (after a "
                  "backup), or restore a backup" % (len(report.problems) + report.more))
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
    home = home_path(args)
    try:
        report, kept = storecheck.restore(args.file, home)
    except ValueError as e:
        raise CliError(str(e), EXIT_FAILURE)
    print("restored %s from %s: %d feeds, %d entries%s" % (
        home, args.file, report.feeds, report.entries,
        "; the replaced store is kept as %s" % kept if kept else ""))
    return 0
