"""A simulated board bridged into a real `tssb web`, and a headless Chromium to look at it
(the browser tests and tools/bench_web.py).

`Rig` boots a board the way the demo does (tssb.sim.usb.UsbBoard: the firmware's loop and
USB serial bridge on a pseudo-terminal) with a feed of its own, then starts
`tssb web --serial PTY --port 0` as a subprocess on a fresh home, exactly as a user would.
`Rig.hear(pkt)` makes the board's radio receive a packet from a neighbour.

`launch(playwright)` starts the system's Chromium (Debian's `chromium`, or
$TSSB_CHROMIUM) through Playwright: Playwright's own browser download is not used.
"""
import os
import re
import shutil
import subprocess
import sys
import threading
import time

# A closed network: without these Chromium waits on refused connections (updates, sync,
# QUIC probes); --no-sandbox because CI runs as root.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


def chromium_path():
    """The Chromium binary to use, or None."""
    env = os.environ.get("TSSB_CHROMIUM")
    if env:
        return env if os.path.exists(env) else None
    for name in CHROMIUM_NAMES:
        p = shutil.which(name)
        if p:
            return p
    return None


def missing_reason():
    """Why browser checks cannot run here, or None when they can."""
    if chromium_path() is None:
        return ("no Chromium: install Debian's chromium and chromium-driver "
                "(make browser, as root) or set TSSB_CHROMIUM")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "no playwright: pip install -e .[dev]"
    return None


def launch(pw):
    """A headless system Chromium via Playwright (sync API object `pw`)."""
    return pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS,
                              headless=True)


def author_feed(store, seed, contents):
    """Author `contents` (bytes each) on the feed of `seed` in `store`; returns the fid."""
    from tinyssb import crypto, entry
    fid = crypto.publickey(seed)
    store.add_feed(fid)
    au = entry.Author(fid, lambda m: crypto.sign(seed, m))
    for c in contents:
        seq, pkt, mid, chunks = au.next(c)
        store.append(fid, seq, pkt, mid)
        for i, ch in enumerate(chunks):
            store.put_chunk(fid, seq, i, ch)
    return fid


class Rig:
    """Args:
        home: the host's data directory (fresh).
        posts: the board's own feed (bytes each) before it boots.
        plan: the board's region plan.  scale: the board's clock speed (demo: 4 in tests).
        seed: the board's 32-byte identity seed.
    """

    def __init__(self, home, posts=(), plan="EU868.a", scale=4, seed=b"\x01" * 32,
                 extra_args=()):
        from tinyssb.store import MemStore
        from tssb.sim.usb import UsbBoard
        from tssbfw import regions
        self.home = home
        self.store = MemStore()
        self.fid = author_feed(self.store, seed, posts)
        self.board = UsbBoard(self.store, (seed, self.fid), regions.plan(plan), "board1",
                              scale=scale)
        self.extra_args = list(extra_args)
        self.proc = None
        self.url = None
        self.lines = []

    def start(self):
        self.board.start()
        cmd = [sys.executable, "-m", "tssb", "web", "--home", self.home, "--init", "--port", "0",
               "--serial", self.board.port_name] + self.extra_args
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        found = threading.Event()

        def read():
            for line in self.proc.stdout:
                self.lines.append(line.rstrip("\n"))
                m = re.search(r"web view on (http://\S+)", line)
                if m and self.url is None:
                    self.url = m.group(1)
                    found.set()
        threading.Thread(target=read, daemon=True).start()
        if not found.wait(START_TIMEOUT_S):
            self.stop()
            raise RuntimeError("tssb web did not start: %s" % "\n".join(self.lines[-20:]))
        return self

    def hear(self, pkt, rssi=-90, snr_db=7.5):
        self.board.hear(pkt, rssi, snr_db)

    @property
    def pid(self):
        return self.proc.pid

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.board.stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def wait(cond, limit_s, step_s=0.05):
    """Poll cond() until true or limit_s passed; returns its last value."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(step_s)
    return cond()


def rss_bytes(pid):
    """Resident set size of a process (Linux /proc)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmRSS for pid %d" % pid)
