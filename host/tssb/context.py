"""The host context: one data directory with its store, identity, network key and event log.

Every host command and protocol service gets a `Context`:
  ctx.home       the data directory (default: $TSSB_HOME, else ~/.tssb)
  ctx.store      tssb.store.Store (SQLite) in ctx.home
  ctx.identity   Identity: .seed and .public (32 bytes each, Ed25519)
  ctx.events     event log writer: .emit(event, **fields) -> JSONL in ctx.home/logs/
                 ("ts" from the wall clock unless Context.open gets another `clock`);
                 the live file logs/events.jsonl.live rotates into closed *.jsonl files
  ctx.network_key  the 32-byte secret-handshake network key of this deployment
"""
import errno
import os
import secrets
import sys
import threading
import time

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: rotation is then per process only
    fcntl = None

import nacl.bindings
from tinyssb import eventlog

from tssb.homelock import Hold
from tssb.store import DB_NAME, make_home, open_store

# The SSB main-net "caps" key (Scuttlebutt Protocol Guide, "Handshake"); selectable with
# `tssb id --network ssb-main`. The default for tssb is a fresh per-deployment key.
SSB_MAIN_NETWORK_KEY = bytes.fromhex(
    "d4a1cb88a66f02f8db635ce26441cc5dac1b08420ceaac230839b755845a9ffb")
NETWORK_KEY_CONFIG = "network_key"
HOME_ENV = "TSSB_HOME"
# The live event log: ".live" marks a file still being written (docs/events.md). It is
# closed by renaming it to logs/events-<UTC time>-<random>.jsonl once it reaches
# ROTATE_BYTES or is older than ROTATE_S, so a streaming ingest sees each closed file once
# and `tssb-spark ingest` reads the live file's complete lines since its last run.
EVENT_FILE = os.path.join("logs", "events.jsonl.live")
LEGACY_EVENT_FILE = os.path.join("logs", "events.jsonl")   # before rotation: one growing file
ROTATE_BYTES = 8 * 1024 * 1024   # ~40,000 lines: a Spark file split, read in seconds
ROTATE_S = 3600                  # a quiet host's lines still reach the lake within the hour


def default_home():
    """Returns: $TSSB_HOME if set, else ~/.tssb."""
    return os.environ.get(HOME_ENV) or os.path.join(os.path.expanduser("~"), ".tssb")


class NoHome(FileNotFoundError):
    """Context.open(create=False) found no data directory (or no store in it)."""


class Identity:
    """A long-term Ed25519 identity: 32-byte seed and public key."""

    def __init__(self, seed):
        if len(seed) != 32:
            raise ValueError("seed must be 32 bytes")
        self.seed = bytes(seed)
        self.public, self._sk = nacl.bindings.crypto_sign_seed_keypair(self.seed)

    @classmethod
    def generate(cls):
        return cls(secrets.token_bytes(32))

    def sign(self, msg):
        """Returns: the 64-byte detached Ed25519 signature of msg."""
        return nacl.bindings.crypto_sign(msg, self._sk)[:64]

    @property
    def secret_key(self):
        """The 64-byte libsodium secret key (seed || public)."""
        return self._sk


def wall_ms():
    """Unix time in integer milliseconds."""
    return int(time.time() * 1000)


class EventLog:
    """The context's event writer: `tinyssb.eventlog.EventLog` (schema, ids, validation)
    appending to the live JSONL file, rotated by size and age.

    Each line is written and flushed whole under a lock (a thread lock, and an flock on
    logs/.events.lock across processes), so writers never interleave, a crash loses at
    most the line in progress, and no line lands in a file after it was closed.

    Args:
        path: the live JSONL file (…/events.jsonl.live); node: node name.
        clock: function() -> "ts" in Unix ms; default the wall clock. The demo passes one
            that continues the simulator's virtual timeline, so a report has one time axis.
        rotate_bytes, rotate_s: close the live file at this size / age (seconds, measured
            from the file's first line as this process saw it, or its mtime at open).
    """

    def __init__(self, path, node, clock=None, rotate_bytes=ROTATE_BYTES, rotate_s=ROTATE_S):
        self.path = path
        self.dir = os.path.dirname(path)
        self._lock = threading.Lock()
        try:
            os.makedirs(self.dir, exist_ok=True)
        except OSError:
            pass   # read-only media (above); any other cause shows when a line is written
        self.clock = clock or wall_ms
        self.rotate_bytes = rotate_bytes
        self.rotate_s = rotate_s
        self._log = eventlog.EventLog(node, self.write_line, self.clock)
        self.node = node
        self._born = {}   # inode of the live file -> time.time() this process first saw it
        try:
            with self._locked():
                legacy = os.path.join(self.dir, os.path.basename(LEGACY_EVENT_FILE))
                if os.path.exists(legacy):
                    os.replace(legacy, self._closed_name())
                try:
                    st = os.stat(path)
                except FileNotFoundError:
                    return
                if time.time() - st.st_mtime >= rotate_s:
                    self._rotate()    # left open by an earlier run and idle since
        except PermissionError:
            pass   # a home on read-only media: readable; writing an event fails then
        except OSError as e:
            if e.errno != errno.EROFS:
                raise

    def _locked(self):
        return _FileLock(os.path.join(self.dir, ".events.lock"), self._lock)

    def _closed_name(self):
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        return os.path.join(self.dir, "events-%s-%s.jsonl" % (stamp, secrets.token_hex(3)))

    def _rotate(self):
        os.replace(self.path, self._closed_name())

    def rotate(self):
        """Close the live file now (rename it to a closed name). No-op when empty."""
        with self._locked():
            if os.path.exists(self.path) and os.path.getsize(self.path):
                self._rotate()

    def write_line(self, line):
        """Append one line (without newline) to the live file, rotating it first when due."""
        with self._locked():
            try:
                st = os.stat(self.path)
                born = self._born.setdefault(st.st_ino, time.time())
                if st.st_size >= self.rotate_bytes or time.time() - born >= self.rotate_s:
                    self._rotate()
            except FileNotFoundError:
                pass
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line + "\n")

    def files(self):
        """Returns: the closed files of this log, oldest first, then the live one if any."""
        closed = sorted(os.path.join(self.dir, n) for n in os.listdir(self.dir)
                        if n.startswith("events-") and n.endswith(".jsonl"))
        return closed + ([self.path] if os.path.exists(self.path) else [])

    def emit(self, event, **fields):
        """Write one event (see tinyssb.eventlog.EVENTS). Returns: the event id.

        Raises: ValueError for an unknown event or field (a producer bug).
        """
        return self._log.emit(event, **fields)


class _FileLock:
    """Thread lock plus an exclusive flock on `path` (other processes of the same home)."""

    def __init__(self, path, tlock):
        self.path = path
        self.tlock = tlock
        self.fd = None

    def __enter__(self):
        self.tlock.acquire()
        if fcntl is not None:
            try:
                self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
                fcntl.flock(self.fd, fcntl.LOCK_EX)
            except BaseException:
                self.__exit__()
                raise
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)    # closing the descriptor releases the flock
            self.fd = None
        self.tlock.release()


class Context:
    """Open data directory. Create with `Context.open(home)`."""

    def __init__(self, home, store, identity, events, hold=None):
        self.home = home
        self.store = store
        self.identity = identity
        self.events = events
        self.hold = hold

    @classmethod
    def open(cls, home=None, create=True, clock=None, holder=None):
        """Open (by default creating) a data directory.

        A new directory gets a fresh identity and a fresh random network key, so two
        deployments never talk by accident; peers share the key with `tssb id --network`.

        Args:
            home: data directory; None means default_home().
            create: make the identity and network key if missing.
            clock: the event log's clock (see EventLog); None means the wall clock.
            holder: what to call this process when the home is found held
                (tssb.homelock: "tssb serve"); default: the program's name.
        Returns:
            Context. It holds the home (tssb.homelock.Hold) until closed, so that its
            store is not replaced under it.
        Raises:
            NoHome: create is False and the directory has no store or no identity
                (nothing is created then).
            tssb.homelock.HomeBusy: the store is being replaced (restore, import).
        """
        home = os.path.abspath(home or default_home())
        if not create and not os.path.isfile(os.path.join(home, DB_NAME)):
            raise NoHome("no tssb home at %s (run `tssb id`)" % home)
        if create:
            make_home(home)
        # held before the store is opened: a store replaced meanwhile is never the one
        # this process writes into
        hold = Hold(home, holder or os.path.basename(sys.argv[0] or "python"))
        try:
            store = open_store(home)
        except BaseException:
            hold.release()
            raise
        try:
            got = store.identity()
            if got is None:
                if not create:
                    raise NoHome("no identity in %s (run `tssb id`)" % home)
                ident = Identity.generate()
                store.set_identity(ident.seed, ident.public)
            else:
                ident = Identity(got[0])
            if store.get_config(NETWORK_KEY_CONFIG) is None and create:
                store.set_config(NETWORK_KEY_CONFIG, secrets.token_bytes(32))
            events = EventLog(os.path.join(home, EVENT_FILE),
                              "host-" + ident.public.hex()[:12], clock)
        except BaseException:
            store.close()
            hold.release()
            raise
        return cls(home, store, ident, events, hold)

    @property
    def network_key(self):
        key = self.store.get_config(NETWORK_KEY_CONFIG)
        if key is None or len(key) != 32:
            raise ValueError("no valid network key configured")
        return bytes(key)

    def set_network_key(self, key):
        if len(key) != 32:
            raise ValueError("network key must be 32 bytes")
        self.store.set_config(NETWORK_KEY_CONFIG, bytes(key))

    def close(self):
        self.store.close()
        if self.hold is not None:
            self.hold.release()
            self.hold = None


def parse_public_key(text):
    """Parse a peer's public key: 64 hex digits, or SSB style "@<base64>.ed25519".

    Returns: 32 bytes. Raises: ValueError with a message for the user.
    """
    import base64
    import binascii
    t = text.strip()
    if t.startswith("@"):
        t = t[1:]
    if t.endswith(".ed25519"):
        t = t[:-len(".ed25519")]
    try:
        raw = bytes.fromhex(t) if len(t) == 64 else base64.b64decode(t, validate=True)
    except (ValueError, binascii.Error):
        raw = b""
    if len(raw) != 32:
        raise ValueError("not a public key (64 hex digits or @base64.ed25519): %r" % text)
    return raw


def ssb_id(public):
    """Returns: the SSB-style id "@<base64>.ed25519" of a 32-byte public key."""
    import base64
    return "@" + base64.b64encode(public).decode("ascii") + ".ed25519"
