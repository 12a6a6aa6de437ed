"""`machine` on the virtual board: the parts of MicroPython's ESP32 `machine` module the
firmware touches (pins, SPI, the T-Beam's AXP192 on I2C, the watchdog, reset).

Pins and buses only remember their settings: the radio behind them is the `lora` module
of this folder. The watchdog and reset act as on the board: a watchdog not fed for its
timeout resets the board, and so does reset(). Both end this process at once with a
signal (the unix port has no os._exit, and SystemExit would only reach its REPL), which
the vboard supervisor (tssb.sim.vboard) answers by powering the board up again.
"""
import os
import time

RESET_SIGNAL = 12   # SIGUSR2: reset()
WDT_SIGNAL = 10     # SIGUSR1: the watchdog expired

# AXP192 power controller of the T-Beam at 0x34, registers as after power-on: LDO2 off
# (power-control register 0x12 bit 2), LDO2/3 voltage register 0x28.
_I2C_REGS = {0x34: {0x12: 0x01, 0x28: 0x00}}


class Pin:
    IN = 1
    OUT = 3
    OPEN_DRAIN = 7
    PULL_UP = 1
    PULL_DOWN = 2
    IRQ_RISING = 1
    IRQ_FALLING = 2

    def __init__(self, id, mode=-1, pull=-1, value=None):
        self.id = id
        self._v = 0 if value is None else value

    def init(self, mode=-1, pull=-1, value=None):
        if value is not None:
            self._v = value

    def value(self, v=None):
        if v is None:
            return self._v
        self._v = 1 if v else 0

    def __call__(self, v=None):
        return self.value(v)

    def on(self):
        self._v = 1

    def off(self):
        self._v = 0

    def irq(self, handler=None, trigger=None):
        return None


class SPI:
    def __init__(self, id, baudrate=1000000, **kw):
        self.id = id
        self.baudrate = baudrate


class SoftI2C:
    def __init__(self, scl=None, sda=None, freq=400000):
        pass

    def scan(self):
        return sorted(_I2C_REGS)

    def _regs(self, addr):
        r = _I2C_REGS.get(addr)
        if r is None:
            raise OSError(19)   # ENODEV: nothing acknowledges the address
        return r

    def readfrom_mem(self, addr, reg, n):
        r = self._regs(addr)
        return bytes([r.get(reg + i, 0) for i in range(n)])

    def writeto_mem(self, addr, reg, buf):
        r = self._regs(addr)
        for i in range(len(buf)):
            r[reg + i] = buf[i]


I2C = SoftI2C


def _stat():
    with open("/proc/self/stat") as f:
        return f.read().split()


# read at import, while the host's /proc is still mounted (run.py)
_PID = int(_stat()[0])
_PPID = int(_stat()[3])     # the vboard supervisor: the board's power supply


class WDT:
    """The ESP32 task watchdog: once started it cannot be stopped; not fed within
    `timeout` ms, it resets the board (here: a thread that signals this process)."""

    def __init__(self, id=0, timeout=5000):
        import _thread
        self.timeout = timeout
        self.fed = time.ticks_ms()
        _thread.start_new_thread(self._watch, ())

    def feed(self):
        self.fed = time.ticks_ms()

    def _watch(self):
        while time.ticks_diff(time.ticks_ms(), self.fed) <= self.timeout:
            time.sleep_ms(500)
        print("\r\nwatchdog: not fed for %d ms, resetting" % self.timeout)
        _end(WDT_SIGNAL)


def watch_power(period_s=2):
    """Switch off when the supervisor is gone (killed without stopping the board), so
    no board outlives its `tssb vboard`. Run in a thread."""
    while os.system("kill -0 %d 2>/dev/null" % _PPID) == 0:
        time.sleep(period_s)
    _end(9)


def _end(sig):
    os.system("kill -%d %d" % (sig, _PID))
    time.sleep(1)           # the signal ends the process meanwhile
    raise SystemExit(sig)


def reset():
    _end(RESET_SIGNAL)


def soft_reset():
    _end(RESET_SIGNAL)


def unique_id():
    return b"vboard"


def freq(hz=None):
    return 240000000
