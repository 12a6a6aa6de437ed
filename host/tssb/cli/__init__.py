"""The `tssb` command.

Each sub-command lives in a module of this package, `tssb.cli.<name>`, that defines
`register(subparsers)`; this file discovers them, so adding a command never edits it.
A command's function gets the parsed arguments and returns an exit status (or None for 0).
Errors meant for the user are raised as `CliError` and printed without a traceback.
"""
import argparse
import importlib
import pkgutil
import sys

import tssb


class CliError(Exception):
    """A failure to report to the user as one line, exit status 2 unless given."""

    def __init__(self, message, status=2):
        Exception.__init__(self, message)
        self.status = status


def build_parser():
    p = argparse.ArgumentParser(
        prog="tssb",
        description="tinySSB host toolkit: bridge LoRa boards, store and replicate feeds, "
                    "reconcile between hosts (SETU, trDAG, Bloom clocks), simulate meshes.")
    p.add_argument("--version", action="version", version="tssb " + tssb.VERSION)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    for name in names:
        importlib.import_module(__name__ + "." + name).register(sub)
    return p


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        status = args.func(args)
    except CliError as e:
        print("tssb: error: %s" % e, file=sys.stderr)
        status = e.status
    except KeyboardInterrupt:
        status = 130
    sys.exit(status or 0)
