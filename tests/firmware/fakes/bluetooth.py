"""Fake MicroPython `bluetooth` module: the GATT-server half the firmware uses, plus a
`Central` that plays the phone. Runs on CPython and on the MicroPython unix port (which
has no `bluetooth`).

Follows MicroPython's documentation (docs/library/bluetooth.rst) and, where it is silent,
what the NimBLE stack of the ESP32 port does:

- `BLE()` returns the singleton stack; `reset()` (fake only) throws it away.
- IRQ event codes and data tuples as documented. `addr` is a memoryview into the stack's
  buffer, valid only during the call (it is overwritten afterwards here, so a handler
  that keeps it sees garbage, as on a board).
- IRQs run synchronously (the ESP32 port uses sync events): `_IRQ_GATTS_WRITE` fires while
  the client's write is in progress and the handler reads the value with `gatts_read`.
  Events the handler itself causes (`gap_disconnect`) are delivered after it returns.
- `gatts_register_services` returns one tuple of value handles per service,
  characteristics and their descriptors flattened in definition order. It fails while
  advertising. A NOTIFY/INDICATE characteristic gets a CCCD (0x2902) right after its value
  (as NimBLE adds it); its handle is not returned and a client's write to it raises no IRQ.
- Values hold 20 bytes unless a local `gatts_write` or `gatts_set_buffer` made room; a
  client's write is truncated to that size. `append=True` accumulates until read.
- `gatts_notify` sends whether or not the client subscribed, cut to MTU - 3 bytes (NimBLE
  truncates silently); OSError(ENOTCONN) for a handle that is not connected.
- A central connects only to connectable advertising, which then stops.
- ATT MTU starts at 23; `Central.exchange_mtu` settles on the smaller of both preferences.
"""
import errno

FLAG_BROADCAST = 0x0001
FLAG_READ = 0x0002
FLAG_WRITE_NO_RESPONSE = 0x0004
FLAG_WRITE = 0x0008
FLAG_NOTIFY = 0x0010
FLAG_INDICATE = 0x0020

_IRQ_CENTRAL_CONNECT = 1
_IRQ_CENTRAL_DISCONNECT = 2
_IRQ_GATTS_WRITE = 3
_IRQ_MTU_EXCHANGED = 21

DEFAULT_VALUE_LEN = 20     # "Characteristics and descriptors have a default maximum size of 20"
ATT_MTU_DEFAULT = 23
ATT_MTU_MAX = 517
ATT_HEADER = 3
ADV_MAX = 31
FIRST_HANDLE = 10          # NimBLE's GAP and GATT services come first
CCCD_NOTIFY = b"\x01\x00"

_the = None


def BLE():
    """The singleton stack, as bluetooth.BLE() on a board."""
    global _the
    if _the is None:
        _the = _BLE()
    return _the


def reset():
    """Fake only: forget the stack (a fresh board)."""
    global _the
    _the = None


class UUID:
    """16-bit (int) or 128-bit (string) UUID; UUID(uuid) copies."""

    def __init__(self, value):
        if isinstance(value, UUID):
            self.le = value.le
        elif isinstance(value, int):
            if not 0 <= value <= 0xFFFF:
                raise ValueError("invalid UUID")
            self.le = bytes((value & 0xFF, value >> 8))
        elif isinstance(value, str):
            h = value.replace("-", "")
            if len(h) != 32:
                raise ValueError("invalid UUID")
            from binascii import unhexlify
            self.le = bytes(reversed(unhexlify(h)))
        else:
            b = bytes(value)
            if len(b) not in (2, 4, 16):
                raise ValueError("invalid UUID")
            self.le = b

    def __eq__(self, other):
        if isinstance(other, (str, int)):
            other = UUID(other)
        return isinstance(other, UUID) and self.le == other.le

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash(self.le)

    def __repr__(self):
        if len(self.le) == 2:
            return "UUID(0x%04x)" % (self.le[0] | self.le[1] << 8)
        from binascii import hexlify
        h = hexlify(bytes(reversed(self.le))).decode()
        return "UUID('%s-%s-%s-%s-%s')" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])


CCCD_UUID = UUID(0x2902)


class _Attr:
    def __init__(self, kind, uuid, flags, char=None):
        self.kind = kind          # "char", "desc" or "cccd"
        self.uuid = uuid
        self.flags = flags
        self.char = char          # value handle of the owning characteristic (descriptors)
        self.value = b""
        self.maxlen = DEFAULT_VALUE_LEN
        self.append = False


class _Conn:
    def __init__(self, central):
        self.central = central
        self.mtu = ATT_MTU_DEFAULT
        self.cccd = {}            # cccd handle -> 2-byte value


class _BLE:
    def __init__(self):
        self._active = False
        self._handler = None
        self.gap_name = b"MPY BTSTACK"
        self.mtu = ATT_MTU_DEFAULT
        self.rxbuf = 64
        self.adv = None           # (interval_us, adv_data, resp_data, connectable)
        self.attrs = {}           # handle -> _Attr
        self.services = []        # [(uuid, [char value handles])]
        self.conns = {}
        self._next_conn = 1
        self._queue = []
        self._in_irq = False
        self._addr = bytearray(6)
        self.fail_notify = 0      # fake only: make the next N notifications fail (ENOMEM)
        self.irq_calls = 0

    # -- configuration ----------------------------------------------------------------
    def active(self, *args):
        if args:
            self._active = bool(args[0])
        return self._active

    def config(self, *args, **kw):
        if args:
            if kw or len(args) != 1:
                raise TypeError("query one parameter")
            p = args[0]
            if p == "mac":
                self._need_active()
                return (0, b"\x24\x0a\xc4\x00\x00\x01")
            if p == "gap_name":
                return self.gap_name
            if p == "mtu":
                return self.mtu
            if p == "rxbuf":
                return self.rxbuf
            raise ValueError("unknown config param")
        for k in kw:
            v = kw[k]
            if k == "gap_name":
                self.gap_name = v.encode() if isinstance(v, str) else bytes(v)
            elif k == "mtu":
                if not ATT_MTU_DEFAULT <= v <= ATT_MTU_MAX:
                    raise ValueError("invalid MTU")
                self.mtu = v
            elif k == "rxbuf":
                self.rxbuf = v
            else:
                raise ValueError("unknown config param")
        return None

    def _need_active(self):
        if not self._active:
            raise OSError(errno.EPERM)

    def irq(self, handler):
        self._handler = handler

    # -- events -----------------------------------------------------------------------
    def _emit(self, event, data):
        self._queue.append((event, data))
        if self._in_irq:
            return None
        result = None
        self._in_irq = True
        try:
            while self._queue:
                ev, d = self._queue.pop(0)
                if ev in (_IRQ_CENTRAL_CONNECT, _IRQ_CENTRAL_DISCONNECT):
                    conn, central = d
                    self._addr[:] = central.addr
                    d = (conn, 0, memoryview(self._addr))
                if ev == _IRQ_CENTRAL_DISCONNECT:
                    self._drop_conn(conn)
                if self._handler is not None:
                    self.irq_calls += 1
                    r = self._handler(ev, d)
                    if ev == event and result is None:
                        result = r
                self._addr[:] = b"\xee" * 6   # the stack reuses its buffer
        finally:
            self._in_irq = False
        return result

    def _drop_conn(self, conn):
        c = self.conns.pop(conn, None)
        if c is not None:
            c.central.conn = None
            c.central.ble = None

    # -- advertising ------------------------------------------------------------------
    def gap_advertise(self, interval_us, adv_data=None, *, resp_data=None, connectable=True):
        if interval_us is None:
            self.adv = None
            return
        self._need_active()
        old = self.adv or (0, b"", b"", True)
        adv = old[1] if adv_data is None else bytes(adv_data)
        resp = old[2] if resp_data is None else bytes(resp_data)
        if len(adv) > ADV_MAX or len(resp) > ADV_MAX:
            raise OSError(errno.EINVAL)
        self.adv = (interval_us // 625 * 625, adv, resp, connectable)

    # -- GATT server ------------------------------------------------------------------
    def gatts_register_services(self, definition):
        self._need_active()
        if self.adv is not None:
            raise OSError(errno.EPERM)    # "Advertising must be stopped before registering"
        self.attrs = {}
        self.services = []
        h = FIRST_HANDLE
        out = []
        for svc in definition:
            suuid, chars = svc
            if not isinstance(suuid, UUID):
                raise TypeError("service UUID")
            h += 1                        # service declaration
            handles = []
            values = []
            for ch in chars:
                if len(ch) not in (2, 3) or not isinstance(ch[0], UUID) or \
                        not isinstance(ch[1], int):
                    raise TypeError("characteristic must be (UUID, flags[, descriptors])")
                h += 1                    # characteristic declaration
                vh = h
                h += 1
                self.attrs[vh] = _Attr("char", ch[0], ch[1])
                handles.append(vh)
                values.append(vh)
                if ch[1] & (FLAG_NOTIFY | FLAG_INDICATE):
                    self.attrs[h] = _Attr("cccd", CCCD_UUID, FLAG_READ | FLAG_WRITE, vh)
                    h += 1
                for d in (ch[2] if len(ch) == 3 else ()):
                    if len(d) != 2 or not isinstance(d[0], UUID) or not isinstance(d[1], int):
                        raise TypeError("descriptor must be (UUID, flags)")
                    self.attrs[h] = _Attr("desc", d[0], d[1], vh)
                    handles.append(h)
                    h += 1
            self.services.append((suuid, values))
            out.append(tuple(handles))
        return tuple(out)

    def _attr(self, handle):
        a = self.attrs.get(handle)
        if a is None:
            raise OSError(errno.EINVAL)
        return a

    def gatts_read(self, value_handle):
        a = self._attr(value_handle)
        v = a.value
        if a.append:
            a.value = b""
        return v

    def gatts_write(self, value_handle, data, send_update=False):
        a = self._attr(value_handle)
        a.value = bytes(data)
        if len(a.value) > a.maxlen:
            a.maxlen = len(a.value)
        if send_update:
            for conn in list(self.conns):
                c = self.conns[conn]
                for ch, cv in c.cccd.items():
                    if self.attrs[ch].char == value_handle and cv[0] & 1:
                        self.gatts_notify(conn, value_handle)

    def gatts_set_buffer(self, value_handle, n, append=False):
        a = self._attr(value_handle)
        a.maxlen = n
        a.append = bool(append)

    def gatts_notify(self, conn_handle, value_handle, data=None):
        c = self.conns.get(conn_handle)
        if c is None:
            raise OSError(errno.ENOTCONN)
        a = self._attr(value_handle)
        if self.fail_notify > 0:
            self.fail_notify -= 1
            raise OSError(errno.ENOMEM)
        payload = a.value if data is None else bytes(data)
        c.central._deliver(value_handle, payload[:c.mtu - ATT_HEADER])

    def gap_disconnect(self, conn_handle):
        c = self.conns.get(conn_handle)
        if c is None:
            return False
        self._emit(_IRQ_CENTRAL_DISCONNECT, (conn_handle, c.central))
        return True


class Central:
    """A GATT client connected to the fake stack (the phone's side of the link)."""

    def __init__(self, addr=b"\x5a\x11\x22\x33\x44\x55", mtu=ATT_MTU_MAX):
        self.addr = bytes(addr)
        self.pref_mtu = mtu
        self.ble = None
        self.conn = None
        self.notifications = []   # (value handle, bytes), oldest first

    @property
    def connected(self):
        return self.conn is not None

    def scan(self, ble=None):
        """(adv_data, resp_data) of the stack's advertising, or None when it is silent."""
        ble = ble or BLE()
        if ble.adv is None:
            return None
        return ble.adv[1], ble.adv[2]

    def connect(self, ble=None):
        ble = ble or BLE()
        if ble.adv is None or not ble.adv[3]:
            raise OSError(errno.ETIMEDOUT)   # nothing connectable advertised
        ble.adv = None
        conn = ble._next_conn
        ble._next_conn += 1
        ble.conns[conn] = _Conn(self)
        self.ble = ble
        self.conn = conn
        ble._emit(_IRQ_CENTRAL_CONNECT, (conn, self))
        return conn

    def _link(self):
        if self.conn is None:
            raise OSError(errno.ENOTCONN)
        return self.ble.conns[self.conn]

    def exchange_mtu(self, mtu=None):
        c = self._link()
        c.mtu = min(mtu or self.pref_mtu, self.ble.mtu)
        self.ble._emit(_IRQ_MTU_EXCHANGED, (self.conn, c.mtu))
        return c.mtu

    @property
    def mtu(self):
        return self._link().mtu

    def discover(self):
        """[(service UUID, [(UUID, properties, value handle, [(UUID, handle), ...])])]"""
        self._link()
        ble = self.ble
        out = []
        for suuid, values in ble.services:
            chars = []
            for vh in values:
                a = ble.attrs[vh]
                descs = [(d.uuid, h) for h, d in sorted(ble.attrs.items())
                         if d.char == vh]
                chars.append((a.uuid, a.flags, vh, descs))
            out.append((suuid, chars))
        return out

    def read(self, handle):
        c = self._link()
        a = self.ble._attr(handle)
        if a.kind == "cccd":
            return c.cccd.get(handle, b"\x00\x00")
        if not a.flags & FLAG_READ:
            raise OSError(errno.EACCES)       # ATT: read not permitted
        return a.value

    def write(self, handle, data, response=True):
        c = self._link()
        ble = self.ble
        a = ble._attr(handle)
        data = bytes(data)
        if a.kind == "cccd":
            if len(data) != 2:
                raise OSError(errno.EINVAL)
            c.cccd[handle] = data
            return
        need = FLAG_WRITE if response else FLAG_WRITE_NO_RESPONSE
        if not a.flags & need:
            raise OSError(errno.EACCES)       # ATT: write not permitted
        if not response and len(data) > c.mtu - ATT_HEADER:
            raise ValueError("write command longer than MTU - 3")
        # longer writes with response go as prepared writes; the server keeps maxlen bytes
        if a.append:
            a.value = (a.value + data)[:a.maxlen]
        else:
            a.value = data[:a.maxlen]
        ble._emit(_IRQ_GATTS_WRITE, (self.conn, handle))

    def disconnect(self):
        if self.conn is not None:
            self.ble._emit(_IRQ_CENTRAL_DISCONNECT, (self.conn, self))

    def _deliver(self, handle, data):
        self.notifications.append((handle, bytes(data)))
