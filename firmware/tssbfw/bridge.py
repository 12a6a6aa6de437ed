"""Device side of the USB serial bridge, over the shared link framing (tinyssb.link).

The firmware calls these methods (the seam in app.py):

  on_radio_rx(pkt, rx)     a checked packet (CRC stripped) heard on air; rx has rssi/snr
  on_radio_tx(frame)       a frame sent on air (packet + CRC32)
  on_event(line)           one JSONL event line (shared schema)
  poll() -> list           commands received from the host, each a tuple handled by
                           Firmware.command(): ("send", pkt), ("status",),
                           ("config_get", key), ("config_set", key, value),
                           ("set_epoch", epoch_ms), and from CMD requests ("info",),
                           ("reboot",), ("repl",), ("config_set_many", {key: value})
  reply(cmd, result)       the result of a command (dict, value or error string), in the
                           order poll() handed them out

What crosses the link: packets heard on air go up as RX (with RSSI/SNR), frames the
board sent go up as TX (so the host hears the board's own node like a neighbour), event
lines as EVENT. A TX from the host is both a neighbour's packet for the board's node
(`attach(fw)` wires that) and a packet to send on air ("send").

Bounds: the host decides what arrives, so all it can make the board hold is bounded
here. The port is read only while fewer than MAX_CMDS commands wait, so at most that many
plus one read's worth (READ_CHUNK bytes, ~60 of the smallest frames) wait between polls;
each poll hands out at most MAX_CMDS commands, host packets included (each may cost a
signature check); a request id lives only until the next poll.

NullBridge does nothing (a board without a host attached). MemoryBridge records
everything and lets tests inject commands.
"""
from tinyssb import link


class NullBridge:
    def on_radio_rx(self, pkt, rx):
        pass

    def on_radio_tx(self, frame):
        pass

    def on_event(self, line):
        pass

    def poll(self):
        return ()

    def reply(self, cmd, result):
        pass


class MemoryBridge(NullBridge):
    def __init__(self, max_items=256):
        self.max_items = max_items
        self.rx = []
        self.tx = []
        self.lines = []
        self.replies = []
        self.inbox = []

    def _keep(self, lst, item):
        lst.append(item)
        if len(lst) > self.max_items:
            lst.pop(0)

    def on_radio_rx(self, pkt, rx):
        self._keep(self.rx, bytes(pkt))

    def on_radio_tx(self, frame):
        self._keep(self.tx, bytes(frame))

    def on_event(self, line):
        self._keep(self.lines, line)

    def poll(self):
        cmds, self.inbox = self.inbox, []
        return cmds

    def reply(self, cmd, result):
        self._keep(self.replies, (cmd, result))


# Bytes read from the port per poll; a USB CDC packet is 64 bytes, a few of them per poll
# keeps the host loop short between watchdog feeds.
READ_CHUNK = 512
# Commands handed to the firmware per poll (the host loop polls every 50 ms): bounds the
# work a flood from the host causes. A host packet may be an entry whose signature check
# takes up to ~0.9 s on an ESP32 (esp32-board-budget.md), so 8 stay well inside the 30 s
# watchdog, and 8 a poll (~160 a second) is more than 115200 baud carries.
MAX_CMDS = 8
# CMD requests the board serves; STATUS, CFG_GET, CFG_SET, TIME and TX have their own
# message types, so a CMD naming anything else is refused.
CMD_OPS = ("info", "reboot", "repl", "config_set_many")
# On-air frames carry a 4-byte CRC32 (tinyssb.frames); the link sends the bare packet.
CRC_LEN = 4


def _signal(rx, name, scale=1):
    v = getattr(rx, name, None)
    if v is None:
        return 0
    v = int(v * scale)
    return -32768 if v < -32768 else (32767 if v > 32767 else v)


class SerialBridge(NullBridge):
    """The USB serial bridge.

    Args:
        read: function(n) -> bytes or None, non-blocking (e.g. a UART's read, or a
            poll()-guarded sys.stdin.buffer.read on USB CDC).
        write: function(bytes) (a UART's or sys.stdout.buffer's write).
        name: node name sent in HELLO.
        info: dict of extra HELLO fields (fid, board, fw).
    """

    def __init__(self, read, write, name="board", info=None):
        self._read = read
        self._write = write
        self.name = name
        self.info = info or {}
        self.dec = link.Decoder()
        self.fw = None
        self._asked = []     # [cmd, rid] of the last poll's requests, until reply()
        self._pending = []   # (cmd, rid) read beyond MAX_CMDS, handed out first
        self.counters = {"write_errors": 0, "read_errors": 0, "host_pkts": 0,
                         "refused": 0}
        self.host = None     # the host's HELLO dict, once seen

    def attach(self, fw):
        """Let packets from the host reach the board's node (fw: app.Firmware)."""
        self.fw = fw

    def _send(self, frame):
        try:
            self._write(frame)
        except OSError:
            self.counters["write_errors"] += 1

    def say_hello(self):
        d = dict(self.info)
        self._send(link.hello("device", self.name, **d))

    def on_radio_rx(self, pkt, rx):
        try:
            # the driver's RxPacket.snr is already in quarter dB, the link's unit
            self._send(link.rx(pkt, _signal(rx, "rssi"), _signal(rx, "snr")))
        except link.LinkError:
            pass

    def on_radio_tx(self, frame):
        pkt = bytes(frame[:len(frame) - CRC_LEN])
        try:
            self._send(link.tx(pkt))
        except link.LinkError:
            pass

    def on_event(self, line):
        try:
            self._send(link.event(line))
        except link.LinkError:
            pass

    def _deliver(self, pkt):
        fw = self.fw
        if fw is None:
            return
        for p in fw.link.on_packet(pkt, fw.clock.now()):
            fw.enqueue(p)

    def poll(self):
        self._asked = []     # a request not answered in its own turn never will be
        if len(self._pending) < MAX_CMDS:
            try:
                data = self._read(READ_CHUNK)
            except OSError:
                self.counters["read_errors"] += 1
                data = None
            if data:
                for m in self.dec.feed(data):
                    c = self._message(m)
                    if c is not None:
                        self._pending.append(c)
        todo = self._pending[:MAX_CMDS]
        self._pending = self._pending[MAX_CMDS:]
        cmds = []
        for cmd, rid in todo:
            if cmd[0] == "hello":
                self.say_hello()
                continue
            if cmd[0] == "send":
                self.counters["host_pkts"] += 1
                self._deliver(cmd[1])
            else:
                self._asked.append([cmd, rid])
            cmds.append(cmd)
        return cmds

    def _message(self, m):
        """(command, request id) for one decoded link message, or None."""
        kind = m[0]
        if kind == "tx":
            return ("send", m[1]), None
        if kind == "hello":
            self.host = m[1]
            return ("hello",), None
        if kind == "status" and m[2] is None:
            cmd = ("status",)
        elif kind == "cfg_get":
            cmd = ("config_get", m[2]) if m[2] else ("config_get",)
        elif kind == "cfg_set":
            cmd = ("config_set", m[2], m[3])
        elif kind == "time":
            cmd = ("set_epoch", m[2])
        elif kind == "cmd":
            if m[2] not in CMD_OPS:
                self.counters["refused"] += 1
                self._send(link.error(m[1], "unknown command"))
                return None
            cmd = (m[2],) + tuple(m[3])
        else:
            return None   # replies, events and errors are not for the board
        return cmd, m[1]

    def reply(self, cmd, result):
        rid = None
        for i in range(len(self._asked)):
            if self._asked[i][0] is cmd:
                rid = self._asked.pop(i)[1]
                break
        if rid is None:
            return        # "send" commands are not answered: the host streams packets
        try:
            if cmd[0] == "status" and isinstance(result, dict) and "error" not in result:
                self._send(link.status_reply(rid, result))
            elif isinstance(result, dict) and "error" in result:
                self._send(link.error(rid, str(result["error"])))
            else:
                self._send(link.reply(rid, result))
        except (link.LinkError, TypeError, ValueError):
            self._send(link.error(rid, "reply too large"))
