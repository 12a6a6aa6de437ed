"""The tinySSB Android app's BLE central, as `BlePeers.kt` behaves, over the fake stack.

What the app does with a board (ssbc/tinySSB android/.../tssb/ble/BlePeers.kt):
scan with a filter on the service UUID; connect; requestMtu(128); when the MTU exchange
succeeds, discoverServices(); find the service, its TX characteristic and RX; read RX's
name descriptor (the peer's public key); enable notifications on TX by writing
ENABLE_NOTIFICATION_VALUE to TX's first descriptor; from then on every notification on TX
is one packet for the app's demultiplexer, and each packet it sends is one write (with
response) to RX. More than 5 failed writes and it disconnects.

`App` does the same with a tinyssb Node as its replication engine.
"""
import bluetooth

SERVICE = "6e400001-7646-4b5b-9a50-71becce51558"
RX = "6e400002-7646-4b5b-9a50-71becce51558"
TX = "6e400003-7646-4b5b-9a50-71becce51558"
ST = "6e400004-7646-4b5b-9a50-71becce51558"
NAME = "6e400002-7646-4b5b-9a50-71becce51559"
APP_MTU = 128
WRITE_ERRORS_MAX = 5


def ad_fields(data):
    """{AD type: [payload, ...]} of an advertising payload."""
    out = {}
    i = 0
    while i < len(data):
        n = data[i]
        if n == 0 or i + 1 + n > len(data):
            break
        out.setdefault(data[i + 1], []).append(bytes(data[i + 2:i + 1 + n]))
        i += 1 + n
    return out


def advertises(adv, uuid):
    """True when the advertising data lists the 128-bit service UUID (types 0x06/0x07)."""
    le = bluetooth.UUID(uuid).le
    f = ad_fields(adv)
    for t in (0x06, 0x07):
        for p in f.get(t, ()):
            for k in range(0, len(p) - 15, 16):
                if p[k:k + 16] == le:
                    return True
    return False


class App:
    def __init__(self, node, central=None):
        self.node = node
        self.central = central or bluetooth.Central()
        self.online = False
        self.peer_key = None
        self.name = None
        self.mtu = None
        self.chars = {}          # UUID string -> (properties, value handle, descriptors)
        self.tx = self.rx = None
        self.write_errors = 0
        self.sent = 0
        self.received = 0
        self.status = []         # status notifications seen (text)

    def connect(self, ble=None):
        """Scan, connect and set up as the app does; False when no board advertises."""
        c = self.central
        found = c.scan(ble)
        if found is None or not advertises(found[0], SERVICE):
            return False
        f = ad_fields(found[1])
        self.name = f[0x09][0].decode() if 0x09 in f else None
        c.connect(ble)
        self.mtu = c.exchange_mtu(APP_MTU)
        for suuid, chars in c.discover():
            if suuid != bluetooth.UUID(SERVICE):
                continue
            for uuid, props, vh, descs in chars:
                for name in (RX, TX, ST):
                    if uuid == bluetooth.UUID(name):
                        self.chars[name] = (props, vh, descs)
        if TX not in self.chars:
            c.disconnect()        # "Couldn't find the TinySSB-Service, disconnecting"
            return False
        if RX in self.chars:
            self.rx = self.chars[RX][1]
            for uuid, h in self.chars[RX][2]:
                if uuid == bluetooth.UUID(NAME):
                    self.peer_key = c.read(h)
        props, self.tx, descs = self.chars[TX]
        c.write(descs[0][1], bluetooth.CCCD_NOTIFY)   # "there should be only one descriptor"
        self.online = True
        self.write_errors = 0
        return True

    def disconnect(self):
        self.central.disconnect()
        self.online = False

    def write(self, pkt):
        if not self.online:
            return False
        try:
            self.central.write(self.rx, pkt, True)
            self.sent += 1
            self.write_errors = 0
            return True
        except (OSError, ValueError):
            self.write_errors += 1
            if not self.central.connected or self.write_errors > WRITE_ERRORS_MAX:
                self.online = False
            return False

    def step(self, now):
        """Take the notifications that arrived, then send what the node has to send."""
        if self.online and not self.central.connected:
            self.online = False
        notes = self.central.notifications
        self.central.notifications = []
        for h, data in notes:
            if h == self.tx:
                self.received += 1
                for p in self.node.on_packet(data, now):
                    self.write(p)
            elif ST in self.chars and h == self.chars[ST][1]:
                # Android passes only registered handles (TX) to the app; kept for tests
                self.status.append(data.decode())
        for p in self.node.tick(now):
            self.write(p)
