"""Who uses a home: every process that opens it holds it, shared; replacing its store
(`tssb store restore`, `tssb id --import`) takes it alone, and names the holders when it
cannot (a server still writing into a replaced store would lose what it stores next).

  home/.lock       flock: shared by each process with the home open, exclusive while the
                   store is replaced
  home/.holders/   a file per holding process, "<pid>.<random>", with its command
                   ("tssb serve") as JSON; its process holds an flock on it while it
                   lives, so the file of a process that died is known to be stale

POSIX only (fcntl.flock); elsewhere holding is a no-op and replacing is not guarded.
"""
import contextlib
import json
import os
import secrets
import time

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None

LOCK_NAME = ".lock"
HOLDERS_DIR = ".holders"
# How long opening a home waits for a store replacement to finish (a restore copies and
# checks the backup first: seconds for a large store).
WAIT_S = 60.0
POLL_S = 0.05
MAX_COMMAND = 80          # characters of a holder's command kept
MAX_RECORD = 1024         # bytes of a holder file read


class HomeBusy(Exception):
    """The home is held by other processes. `holders`: [(pid, command)]."""

    def __init__(self, home, holders, replacing=False):
        self.home = home
        self.holders = holders
        self.replacing = replacing
        if replacing:
            text = "%s is being restored or imported by another tssb" % home
        else:
            text = "%s is in use by %s" % (home, describe(holders) or "another process")
        super().__init__(text)


def describe(holders):
    """"tssb serve (pid 12), tssb read (pid 14)" for [(pid, command)]."""
    return ", ".join("%s (pid %d)" % (cmd, pid) for pid, cmd in holders)


def _open_lock(home, create=True):
    flags = os.O_RDWR | getattr(os, "O_CLOEXEC", 0) | (os.O_CREAT if create else 0)
    return os.open(os.path.join(home, LOCK_NAME), flags, 0o600)


class Hold:
    """The shared hold of one open home (tssb.context.Context holds one).

    Args:
        home: the data directory (must exist).
        command: what to call this process in a refusal ("tssb serve").
        wait_s: how long to wait while the store is being replaced.
    Raises:
        HomeBusy: the store was still being replaced after wait_s.
    A home whose lock file cannot be made (read-only media) is not held: nothing can
    replace its store either.
    """

    def __init__(self, home, command, wait_s=WAIT_S):
        self.fd = None
        self.record = None
        self._record_fd = None
        if fcntl is None:
            return
        try:
            fd = _open_lock(home)
        except OSError:
            return
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise HomeBusy(home, [], replacing=True)
                time.sleep(POLL_S)
        self.fd = fd
        try:
            self._register(home, command)
        except OSError:
            pass     # held all the same; a refusal then names no command for us

    def _register(self, home, command):
        d = os.path.join(home, HOLDERS_DIR)
        os.makedirs(d, mode=0o700, exist_ok=True)
        name = "%d.%s" % (os.getpid(), secrets.token_hex(4))
        tmp = os.path.join(d, "." + name)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0),
                     0o600)
        # locked before it gets its listed name: a lister never takes it for a dead one's
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, json.dumps({"pid": os.getpid(),
                                 "command": str(command)[:MAX_COMMAND]}).encode())
        os.rename(tmp, os.path.join(d, name))
        self._record_fd = fd
        self.record = os.path.join(d, name)

    def release(self):
        if self.record is not None:
            try:
                os.remove(self.record)
            except OSError:
                pass
            self.record = None
        for attr in ("_record_fd", "fd"):
            fd = getattr(self, attr)
            if fd is not None:
                os.close(fd)          # closing releases its flock
                setattr(self, attr, None)


def holders(home):
    """[(pid, command)] of the live processes holding `home`; stale files are removed."""
    d = os.path.join(home, HOLDERS_DIR)
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return []
    out = []
    for name in names:
        if name.startswith("."):
            continue
        path = os.path.join(d, name)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:     # its process lives and holds it
                rec = _record(os.read(fd, MAX_RECORD))
                if rec is not None:
                    out.append(rec)
                continue
            try:
                os.remove(path)         # its process is gone
            except OSError:
                pass
        finally:
            os.close(fd)
    return out


def _record(raw):
    try:
        d = json.loads(raw)
        pid, cmd = d["pid"], d["command"]
    except (ValueError, TypeError, KeyError, RecursionError):
        return None
    if not isinstance(pid, int) or isinstance(pid, bool) or not isinstance(cmd, str):
        return None
    return pid, "".join(c if c.isprintable() else "?" for c in cmd[:MAX_COMMAND])


@contextlib.contextmanager
def alone(home):
    """Hold `home` alone while its store is replaced (the directory must exist).

    Raises:
        HomeBusy: another process holds it (its holders named).
    """
    if fcntl is None:
        yield
        return
    fd = _open_lock(home)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise HomeBusy(home, holders(home))
        holders(home)        # clears the files of holders that died
        yield
    finally:
        os.close(fd)
