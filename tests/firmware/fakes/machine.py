"""Fake `machine` module for running the firmware without hardware (CPython and the
MicroPython unix port, which has no machine.Pin). Follows the documented MicroPython API
for the parts the firmware uses: Pin, SPI, SoftI2C, WDT. Every object records what was
done to it in `LOG`, so tests can check pins and power sequencing.
"""
LOG = []


class Pin:
    IN = 1
    OUT = 3
    PULL_UP = 1
    PULL_DOWN = 2
    IRQ_RISING = 1
    IRQ_FALLING = 2

    def __init__(self, id, mode=-1, pull=-1, value=None):
        if not isinstance(id, int) or not 0 <= id <= 48:
            raise ValueError("invalid pin")
        self.id = id
        self.mode = mode
        self._v = 0 if value is None else value
        LOG.append(("pin", id, mode, value))

    def value(self, v=None):
        if v is None:
            return self._v
        self._v = 1 if v else 0
        LOG.append(("pin_value", self.id, self._v))

    def on(self):
        self.value(1)

    def off(self):
        self.value(0)

    def irq(self, handler=None, trigger=None):
        self.handler = handler


class SPI:
    def __init__(self, id, baudrate=1000000, sck=None, mosi=None, miso=None, **kw):
        if id not in (1, 2):  # ESP32 hardware SPI ids (quickref)
            raise ValueError("SPI(%s) doesn't exist" % id)
        for p in (sck, mosi, miso):
            if not isinstance(p, Pin):
                raise TypeError("SPI pins must be Pin objects")
        self.id = id
        self.baudrate = baudrate
        LOG.append(("spi", id, baudrate, sck.id, mosi.id, miso.id))


class I2CDevice:
    """A register file at one I2C address (e.g. an AXP192)."""

    def __init__(self, regs=None):
        self.regs = dict(regs or {})


I2C_DEVICES = {}  # addr -> I2CDevice


class SoftI2C:
    def __init__(self, scl, sda, freq=400000):
        if not isinstance(scl, Pin) or not isinstance(sda, Pin):
            raise TypeError("I2C pins must be Pin objects")
        self.scl = scl.id
        self.sda = sda.id

    def _dev(self, addr):
        d = I2C_DEVICES.get(addr)
        if d is None:
            raise OSError(19)  # ENODEV, as on hardware when nothing acks
        return d

    def readfrom_mem(self, addr, reg, n):
        d = self._dev(addr)
        return bytes(d.regs.get(reg + i, 0) for i in range(n))

    def writeto_mem(self, addr, reg, buf):
        d = self._dev(addr)
        for i in range(len(buf)):
            d.regs[reg + i] = buf[i]
        LOG.append(("i2c_write", addr, reg, bytes(buf)))


class WDT:
    def __init__(self, id=0, timeout=5000):
        if timeout < 1:
            raise ValueError("timeout")
        self.timeout = timeout
        self.feeds = 0

    def feed(self):
        self.feeds += 1


def reset():
    raise SystemExit("machine.reset")
