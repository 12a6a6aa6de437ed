"""One place that turns what can go wrong under a command into one line for the user.

Expected failures (a damaged or read-only store, a file or directory that cannot be
written, a serial port that is not there, Ctrl-C, the subsystems' own errors) become
`tssb: error: WHAT: WHAT TO DO` and an exit status; anything else is a bug: one line
saying so, and its traceback only at debug level.
"""
import errno
import logging
import os
import signal
import sqlite3
import sys
import threading
import traceback

from tssb import cli

log = logging.getLogger("tssb.cli")


def _say(text):
    print("tssb: %s" % text, file=sys.stderr, flush=True)


def _store_error(e, home):
    text = str(e)
    if isinstance(e, sqlite3.OperationalError):
        low = text.lower()
        if "readonly" in low or "read-only" in low:
            return ("the store in %s is read-only (%s): make the directory and tssb.db "
                    "writable, or use another --home" % (home, text))
        if "unable to open" in low:
            return ("cannot open the store in %s (%s): check that the directory exists "
                    "and is writable" % (home, text))
        if "locked" in low or "busy" in low:
            return ("the store in %s is busy (%s): another tssb holds it; try again when "
                    "it is done" % (home, text))
        if "disk" in low and "full" in low:
            return "the disk holding %s is full (%s): free some space" % (home, text)
    return ("the store in %s is damaged (%s): `tssb store check --home %s` tells what can be "
            "mended and how (docs/store.md)" % (home, text, home))


def _os_error(e):
    what = e.strerror or str(e)
    where = e.filename
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        hint = "check the permissions, or choose another place"
    elif e.errno == errno.ENOSPC:
        hint = "free some space"
    elif e.errno in (errno.ENOENT, errno.ENOTDIR):
        hint = "check the path"
    elif e.errno == errno.EISDIR:
        hint = "name a file, not a directory"
    elif e.errno == errno.EEXIST:
        hint = "remove it or choose another name"
    elif isinstance(e, ConnectionError) or e.errno in (errno.ECONNREFUSED,
                                                        errno.EHOSTUNREACH):
        hint = "is the peer running and reachable?"
    else:
        hint = None
    line = "%s: %s" % (where, what) if where else what
    return line + (": " + hint if hint else "")


# The subsystems' own errors that may reach the CLI: (module, class, what failed). A
# command usually words them itself; this is the net under it. Only modules already
# imported are looked at (an error of a module never imported cannot have been raised).
SUBSYSTEM_ERRORS = (
    ("tssb.setu.errors", "SetuError", "set reconciliation failed"),
    ("tssb.trdag.errors", "TrdagError", "DAG sync failed"),
    ("tssb.clock.errors", "ClockError", "clock protocol failed"),
    ("tssb.certs.errors", "CertError", "certificate check failed"),
    ("tssb.session.errors", "ProtocolError", "secure session failed"),
    ("tssb.session.errors", "StreamRefused", "the peer refused the service"),
    ("tssb.channel", "ChannelClosed", "the session ended early"),
    ("tssb.sim.errors", "ScenarioError", "bad scenario"),
    ("tssb.store", "StoreError", "the store refused a write"),
    ("tssb.bridge.ports", "PortChoiceError", "no board port"),
    ("tssb.flash.bundle", "BundleError", "cannot build the firmware bundle"),
    ("tssb.flash", "FlashError", "flashing failed"),
    ("tssb.homelock", "HomeBusy", "the home is busy"),
    ("tssb.ownfeed", "FeedBehind", "refused"),
    ("tinyssb.errors", "WireError", "malformed data"),
)


def _subsystem_error(e):
    for module, name, what in SUBSYSTEM_ERRORS:
        cls = getattr(sys.modules.get(module), name, None)
        if cls is not None and isinstance(e, cls):
            return "%s: %s" % (what, e)
    return None


def explain(e, args):
    """One line for an expected exception, or None for a bug."""
    if isinstance(e, sqlite3.Error):
        try:
            home = cli.home_path(args)
        except cli.CliError:
            home = args.home
        return _store_error(e, home)
    line = _subsystem_error(e)
    if line is not None:
        return line
    try:
        import serial
        if isinstance(e, serial.SerialException):
            return ("serial port: %s: check the cable and the port name "
                    "(`tssb bridge --list`)" % e)
    except ImportError:   # pragma: no cover - pyserial is a dependency
        pass
    if isinstance(e, TimeoutError):   # asyncio's too: an OSError without errno
        return "timed out%s: try again, or raise the command's --timeout" % (
            ": %s" % e if str(e) else "")
    if isinstance(e, OSError):
        return _os_error(e)
    if isinstance(e, MemoryError):
        return "out of memory"
    return None


def _on_sigint(interrupted):
    def handler(signum, frame):
        interrupted.append(signum)
        # a Spark job (demo) gets the same Ctrl-C in its JVM: py4j then fails with its
        # own errors and logs them with tracebacks; the interrupt is what to report
        logging.getLogger("py4j").setLevel(logging.CRITICAL)
        raise KeyboardInterrupt
    return handler


def run(args, debug):
    """Run the command of `args`; returns the exit status."""
    interrupted = []
    main_thread = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGINT, _on_sigint(interrupted)) if main_thread else None
    try:
        return _run(args, debug, interrupted)
    finally:
        if main_thread:
            signal.signal(signal.SIGINT, old)


def _run(args, debug, interrupted):
    try:
        status = args.func(args)
        return cli.EXIT_OK if status is None else status
    except cli.CliError as e:
        _say("error: %s" % e)
        return e.status
    except KeyboardInterrupt:
        _say("interrupted")
        return cli.EXIT_INTERRUPTED
    except BrokenPipeError:
        # `tssb read ... | head`: the reader went away; nothing left to say to it
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):   # not a real file (tests capture stdout)
            pass
        return cli.EXIT_OK
    except Exception as e:
        if interrupted:           # what failed after Ctrl-C failed because of it
            _say("interrupted")
            return cli.EXIT_INTERRUPTED
        line = explain(e, args)
        if line is not None:
            if debug:
                log.debug("details", exc_info=True)
            _say("error: %s" % line)
            return cli.EXIT_FAILURE
        if debug:
            traceback.print_exc()
        _say("internal error: %s: %s (a bug: please report it with the output of the "
             "same command run with -vv)" % (type(e).__name__, e))
        return cli.EXIT_FAILURE
