"""`tssb bridge`: the host node with its ports (serial board, WebSocket, UDP) until stopped."""
import asyncio
import json
import threading
import time

from tinyssb import link

from tssb.bridge import udp, websocket
from tssb.bridge.control import ControlServer
from tssb.bridge.hostnode import HostNode
from tssb.bridge.serial_link import BAUD, BoardPort, SerialLink, open_no_reset
from tssb.chat.service import Service
from tssb.safeparse import InputError, event_record

STATUS_EVERY_S = 10.0
# A board running the firmware answers the host's HELLO at once (one turn of its host
# loop); nothing heard this long after opening the port means no board is there.
NO_BOARD_S = 3.0


# A board's "ts" before this (2000-01-01, Unix ms) is its uptime: TIME has not reached it.
SYNCED_TS_MS = 946684800000


class EventSink:
    """Appends board event lines (JSONL, shared schema) to the host's event file.

    A line that is not one event object (tssb.safeparse.event_record: a JSON object with
    an "event" name, bounded in size and nesting) is counted and dropped, so a confused
    board cannot write garbage into the log the Spark ingest reads nor stop the bridge.
    Lines from a board whose clock was not yet set (no "ts", or uptime-only) are stamped
    with `clock`.
    """

    def __init__(self, target, clock=None):
        """Args: target: the host's event log (tssb.context.EventLog: rotation, locking)
        or a file path; clock: function() -> Unix ms for unstamped lines."""
        self.path = getattr(target, "path", target)
        self._write_line = getattr(target, "write_line", None)
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.written = 0
        self.bad = 0
        self._lock = threading.Lock()

    def __call__(self, line):
        try:
            rec = event_record(line)
        except InputError:
            self.bad += 1
            return
        ts = rec.get("ts")
        if type(ts) is not int or ts < SYNCED_TS_MS:
            rec["ts"] = int(self.clock())
            line = json.dumps(rec)
        if self._write_line is not None:
            self._write_line(line)
        else:
            with self._lock:
                with open(self.path, "a", encoding="utf-8") as f:
                    f.write(line + "\n")
        self.written += 1


def attach_board(h, ctx, resolve, on_event, baud=BAUD, on_state=None):
    """Attach a board on a serial port to HostNode h and start reading it (call from
    the asyncio loop h runs in).

    Args:
        ctx: the host's Context (its node name and feed id go into the HELLO).
        resolve: function() -> serial port name.
        on_event: function(line) for the board's event lines (e.g. an EventSink).
    Returns:
        (BoardPort, SerialLink).
    """
    port = BoardPort(h, on_event=on_event, clock=ctx.events.clock)
    sl = SerialLink(resolve, port.on_message, loop=asyncio.get_running_loop(),
                    hello=link.hello("host", ctx.events.node, fid=ctx.identity.public.hex()),
                    opener=lambda p: open_no_reset(p, baud), on_state=on_state)
    port.link = sl
    h.attach(port)
    sl.start()
    return port, sl


async def run(ctx, resolve=None, baud=BAUD, ws_listen=None, ws_connect=(), use_udp=False,
              udp_iface="0.0.0.0", udp_port=udp.PORT, duration=None, say=print, ble=(),
              ble_factory=None, web=None, warn=None):
    """Run the bridge.

    Args:
        ctx: tssb.context.Context.
        resolve: function() -> serial port name, or None for no board.
        ws_listen: (host, port) for the WebSocket server, or None.
        ws_connect: WebSocket URIs to keep connected to.
        use_udp: join the UDP multicast group.
        duration: seconds to run, or None for ever.
        say: progress output; warn: what the user must act on (default: say).
        ble: Bluetooth addresses of boards to keep connected to (bleak);
            ble_factory: a BleakClient stand-in (tests).
        web: a view started once the ports are up and closed at the end
            (tssb.web.view.WebView): object with async start(hostnode, board_port,
            serial_link) and async close().
    Returns:
        dict of final counters.
    """
    if ble:
        from tssb.bridge import ble as bleport
        ble_factory = ble_factory or bleport.client_class()   # OSError without bleak
    h = HostNode(ctx.store, ctx.identity, ctx.events)
    chats = Service(ctx, h)     # receipts owed, blocks, what becomes of our posts
    tasks = [asyncio.ensure_future(h.run()), asyncio.ensure_future(chats.run())]
    sl = port = server = control = None
    sink = EventSink(ctx.events, ctx.events.clock)
    if resolve is not None:
        port, sl = attach_board(h, ctx, resolve, chats.recorder.tee(sink), baud, _dedup(say))
        # other tssb commands (info, config, reboot...) reach the board through us
        control = ControlServer(port, sl)
        if await control.start(ctx.home):
            say("board requests from other tssb commands on %s" % control.path)
    if ws_listen is not None:
        server = await websocket.serve(h, ws_listen[0], ws_listen[1])
        say("websocket server on ws://%s:%d" % ws_listen)
    for uri in ws_connect:
        tasks.append(asyncio.ensure_future(websocket.connect_forever(h, uri, say)))
    for addr in ble:
        tasks.append(asyncio.ensure_future(
            bleport.connect_forever(h, addr, _dedup(say), ble_factory)))
    if use_udp:
        await udp.open_multicast(h, udp.GROUP, udp_port, udp_iface)
        say("udp multicast %s:%d on %s" % (udp.GROUP, udp_port, udp_iface))
    if sl is not None:
        tasks.append(asyncio.ensure_future(watch_board(port, sl, warn or say)))
    start = time.monotonic()
    try:
        if web is not None:
            await web.start(h, port, sl)
        while duration is None or time.monotonic() - start < duration:
            left = STATUS_EVERY_S if duration is None else min(
                STATUS_EVERY_S, duration - (time.monotonic() - start))
            await asyncio.sleep(max(0.0, left))
            say("feeds %d  rx %d  tx %d  ports %d%s" % (
                len(ctx.store.feeds()), h.stats["rx"], h.stats["tx"], len(h.ports),
                "  board %s" % board_state(port, sl) if sl else ""))
    finally:
        for t in tasks:
            t.cancel()
        if control is not None:
            await control.close()
        if sl is not None:
            sl.stop()
        if server is not None:
            server.close()
        if web is not None:
            await web.close()
    out = dict(h.stats)
    out["feeds"] = len(ctx.store.feeds())
    out["board_events"] = sink.written
    return out


def board_state(port, sl):
    """"up" (the board answers), "silent" (the port is open, nothing answers) or "down"."""
    if not sl.connected:
        return "down"
    return "up" if port.heard else "silent"


async def watch_board(port, sl, say, quiet_s=NO_BOARD_S):
    """Say, once per connection, when nothing answers on an open port: the wrong port, or
    a board without the tinySSB firmware (a stock MicroPython REPL says nothing we
    decode)."""
    seen = 0          # the connection watched (sl.connects)
    since = heard = None
    while True:
        await asyncio.sleep(min(0.25, quiet_s / 4))
        if not sl.connected:
            continue
        if sl.connects != seen:
            seen, since, heard = sl.connects, time.monotonic(), port.heard
        elif since is not None and port.heard == heard and \
                time.monotonic() - since >= quiet_s:
            since = None
            say("no board answers on %s (%g s after opening it, %d bytes heard): is it the "
                "board's port (`tssb bridge --list`), and does the board run the tinySSB "
                "firmware (`tssb deploy`)? still listening" % (
                    sl.port, quiet_s, sl.bytes_in))
        elif port.heard != heard:
            since = None


def _dedup(say):
    last = [None]

    def f(msg):
        if msg != last[0]:
            last[0] = msg
            say(msg)
    return f
