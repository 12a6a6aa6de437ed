"""The `tssb` command.

Each sub-command lives in a module of this package, `tssb.cli.<name>`, that defines
`register(subparsers)`; this file discovers them, so adding a command never edits it.
A command's function gets the parsed arguments and returns an exit status (or None for 0).

One convention for every command:
- global options (`--home`, `--init`, `-v`, `--log-level`) are accepted before or after
  the action, at every level (`tssb --home H dag show X` = `tssb dag show X --home H`);
- exit status: 0 ok, 1 failure, 2 usage (bad arguments), 130 interrupted (Ctrl-C);
  a few commands document more (`cert compare` 3: unlinked);
- errors are one line on stderr (`tssb: error: ...`) saying what went wrong and what to
  do: a command raises `CliError`, and `tssb.cli._errors` turns every expected exception
  (damaged or read-only store, files, serial ports, Ctrl-C) into such a line. Only an
  unexpected exception (a bug) shows its traceback, and only with `-v`/`--log-level debug`;
- logging goes through Python's `logging` (loggers `tssb.<subsystem>`); this module
  installs the one stderr handler, with timestamps, at the level asked for;
- a home is created only by `tssb id` or with `--init` (`open_home`).
"""
import argparse
import importlib
import logging
import os
import pkgutil
import sys

import tssb

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130   # 128 + SIGINT, as shells report it

LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"

# Global options: name -> default. Parsers add them with SUPPRESS so that a value given
# at any level survives the sub-parsers (whose defaults would otherwise overwrite it).
GLOBAL_DEFAULTS = {"home": None, "init": False, "verbose": 0, "log_level": None}


class CliError(Exception):
    """A failure to report to the user as one line; exit status EXIT_USAGE unless given
    (raise with status=EXIT_FAILURE when the arguments were fine but the work failed)."""

    def __init__(self, message, status=EXIT_USAGE):
        Exception.__init__(self, message)
        self.status = status


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose every level accepts the global options."""

    def __init__(self, *args, **kwargs):
        argparse.ArgumentParser.__init__(self, *args, **kwargs)
        g = self.add_argument_group("global options (before or after the action)")
        g.add_argument("--home", metavar="DIR", default=argparse.SUPPRESS,
                       help="data directory (default: $TSSB_HOME, else ~/.tssb)")
        g.add_argument("--init", action="store_true", default=argparse.SUPPRESS,
                       help="create the data directory if it does not exist (else only "
                            "`tssb id` creates one)")
        g.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                       help="log more (-v info, -vv debug, with tracebacks of internal errors)")
        g.add_argument("--log-level", choices=LOG_LEVELS, default=argparse.SUPPRESS,
                       help="log level on stderr (default: warning; info for serve, bridge, "
                            "listen)")


def command_modules():
    """The names of the command modules, sorted (a command per module)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def build_parser():
    p = Parser(
        prog="tssb",
        description="tinySSB host toolkit: bridge LoRa boards, store and replicate feeds, "
                    "reconcile between hosts (SETU, trDAG, Bloom clocks), simulate meshes.",
        epilog="Exit status: 0 ok, 1 failure, 2 usage error, 130 interrupted. "
               "`tssb COMMAND --help` explains each command.")
    p.add_argument("--version", action="version", version="tssb " + tssb.VERSION)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in command_modules():
        importlib.import_module(__name__ + "." + name).register(sub)
    _name_commands(p)
    return p


def _name_commands(parser):
    """Each command's parser sets `command_name` ("tssb dag sync"): how a refusal names
    the process holding a home (tssb.homelock)."""
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub in a.choices.values():
                sub.set_defaults(command_name=sub.prog)
                _name_commands(sub)


def log_level(args):
    """The logging level asked for: --log-level, else -v/-vv, else the command's default."""
    if args.log_level:
        return getattr(logging, args.log_level.upper())
    if args.verbose:
        return logging.DEBUG if args.verbose > 1 else logging.INFO
    return getattr(logging, getattr(args, "log_default", "warning").upper())


def setup_logging(level):
    """One stderr handler with timestamps on the `tssb` logger tree."""
    root = logging.getLogger("tssb")
    for h in list(root.handlers):
        root.removeHandler(h)
    h = logging.StreamHandler(sys.stderr)
    h.setFormatter(logging.Formatter(LOG_FORMAT))
    root.addHandler(h)
    root.setLevel(level)
    root.propagate = False


def home_path(args):
    """The absolute data directory the arguments name. Raises: CliError when it names
    a file (e.g. the store itself: --home ~/.tssb/tssb.db)."""
    from tssb.context import default_home
    home = os.path.abspath(args.home or default_home())
    if os.path.isfile(home):
        if os.path.basename(home) == "tssb.db" or _is_sqlite(home):
            raise CliError("%s is a store file; the home is the directory that holds it: "
                           "--home %s" % (home, os.path.dirname(home)))
        raise CliError("%s is a file, not a data directory: --home names a directory"
                       % home)
    return home


def _is_sqlite(path):
    try:
        with open(path, "rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def require_home(args):
    """The data directory, which must exist (for commands that read its files only)."""
    from tssb.store import DB_NAME
    home = home_path(args)
    if not os.path.isfile(os.path.join(home, DB_NAME)):
        raise CliError("no tssb home at %s: create one with `tssb id --home %s`"
                       % (home, home), EXIT_FAILURE)
    return home


def open_home(args, create=False, clock=None):
    """Open the data directory of a command: `tssb.context.Context`.

    Only `create=True` (tssb id) or `--init` makes a new home; otherwise a missing one is
    a CliError saying how to create it.
    """
    from tssb.context import Context, NoHome
    from tssb.homelock import HomeBusy
    home = home_path(args)
    try:
        return Context.open(home, create=create or args.init, clock=clock,
                            holder=getattr(args, "command_name", "tssb"))
    except NoHome:
        raise CliError("no tssb home at %s: create one with `tssb id --home %s` (or add "
                       "--init)" % (home, home), EXIT_FAILURE)
    except HomeBusy as e:
        raise CliError("%s: try again when it is done" % e, EXIT_FAILURE)


MIN_FEED_PREFIX = 8   # hex digits: 2^32 prefixes, unambiguous in any store of real size


def resolve_feed(ctx, text, known_names=None):
    """The 32-byte feed id FEED names: 'self', 64 hex digits, an @base64.ed25519 id, a
    unique prefix of a stored feed (8+ hex digits) or, with known_names ({fid: name}),
    a unique author name. Raises: CliError."""
    from tssb.context import parse_public_key
    if text == "self":
        return ctx.identity.public
    try:
        return parse_public_key(text)
    except ValueError:
        pass
    t = text.lower()
    named = [f for f, n in (known_names or {}).items() if n == text]
    hits = named
    if all(c in "0123456789abcdef" for c in t) and t and not named:   # "Bea" is a name
        if len(t) < MIN_FEED_PREFIX:
            raise CliError("a feed prefix needs at least %d hex digits" % MIN_FEED_PREFIX)
        hits = [bytes(f) for f in ctx.store.feeds() if bytes(f).hex().startswith(t)]
    if len(hits) != 1:
        raise CliError("%s stored feeds match %r (FEED is 'self', a feed id, a unique prefix "
                       "of 8+ hex digits%s; see `tssb feeds`)"
                       % (len(hits) or "no", text, ", or an author's name" if known_names
                          is not None else ""), EXIT_FAILURE if not hits else EXIT_USAGE)
    return hits[0]


def peer_address(text, option="--peer"):
    """(host, port) of "HOST:PORT" ([v6] brackets allowed). Raises: CliError."""
    from tssb.addr import parse
    try:
        return parse(text)
    except ValueError:
        raise CliError("%s must be HOST:PORT, got %r" % (option, text))


def session_failure(e, where):
    """A CliError (failure) for a secure session that could not be had with `where`."""
    from tssb.channel import ChannelClosed
    from tssb.session import ProtocolError, StreamRefused
    from tssb.session import net
    if isinstance(e, ProtocolError) and e.reason == "handshake refused":
        key_hint = "compare the `tssb id` network fingerprints of both hosts: if they " \
                   "differ, give one the other's key with `tssb id --network HEX`; if they " \
                   "match, that `tssb serve` started before its key changed: restart it"
        peer_hint = "is our key in the server's peers list (`tssb peer add KEY` there), and " \
                    "is its key right here (`tssb peer list`)?"
        hint = {net.REFUSED_AT_HELLO: key_hint, net.REFUSED_AT_AUTH: peer_hint}.get(
            str(e).partition(": ")[2], key_hint + "; " + peer_hint)
        text = "%s (%s)" % (e, hint)
    elif isinstance(e, ProtocolError):
        text = "secure session failed: %s" % e
    elif isinstance(e, StreamRefused):
        text = "the peer refused the service: %s (is it a current `tssb serve`?)" % e.reason
    elif isinstance(e, ChannelClosed):
        text = "the session ended early: %s" % e
    elif isinstance(e, ValueError):   # session.connect: no key known for the address
        text = "%s: add it with `tssb peer add KEY --addr %s`" % (e, where)
    elif isinstance(e, OSError):
        text = "cannot reach %s: %s (is `tssb serve` running there?)" % (
            where, e.strerror or e or type(e).__name__)
    else:
        raise e
    return CliError("%s: %s" % (where, text), EXIT_FAILURE)


# A cancellation swallowed by asyncio.wait_for (CPython < 3.12 loses one that races with
# the awaited result) must not let the work run on: cancel again this often until done.
CANCEL_RETRY_S = 0.05


def run_async(coro):
    """Run a coroutine like asyncio.run, but Ctrl-C stops it at once.

    The first SIGINT cancels the task (its `finally` blocks run, so stores stay
    consistent) and keeps cancelling until it ends; then KeyboardInterrupt is raised even
    if the task swallowed the cancellation. A second SIGINT raises at once.
    """
    import asyncio
    import signal
    import threading
    loop = asyncio.new_event_loop()
    task = loop.create_task(coro)
    interrupted = []

    def cancel():
        if not task.done():
            task.cancel()
            loop.call_later(CANCEL_RETRY_S, cancel)

    def on_sigint(signum, frame):
        if interrupted:
            raise KeyboardInterrupt
        interrupted.append(signum)
        loop.call_soon_threadsafe(cancel)

    main_thread = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGINT, on_sigint) if main_thread else None
    try:
        try:
            result = loop.run_until_complete(task)
        except asyncio.CancelledError:
            if interrupted:
                raise KeyboardInterrupt from None
            raise
        if interrupted:
            raise KeyboardInterrupt
        return result
    finally:
        if main_thread:
            signal.signal(signal.SIGINT, old)
        try:
            rest = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in rest:
                t.cancel()
            if rest:
                loop.run_until_complete(asyncio.gather(*rest, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()


def parse_args(parser, argv=None):
    """Parse argv; the global options get their defaults wherever they were not given."""
    args = parser.parse_args(argv)
    for k, v in GLOBAL_DEFAULTS.items():
        if not hasattr(args, k):
            setattr(args, k, v)
    return args


def main(argv=None):
    parser = build_parser()
    args = parse_args(parser, argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        sys.exit(EXIT_USAGE)
    level = log_level(args)
    setup_logging(level)
    from tssb.cli import _errors
    sys.exit(_errors.run(args, level <= logging.DEBUG))
