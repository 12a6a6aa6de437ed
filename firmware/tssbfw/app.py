"""The firmware application: boot, then four asyncio tasks around one Node.

  rx     await the modem's recv(), check the frame (RadioPort), hand it to the node,
         queue its replies
  tx     pop frames from the scheduler when their slot and the limiter allow, send
  tick   run the node's periodic work (GOSET claims, WANT, CHNK) and queue it
  host   bridge commands (Firmware.command: status, info, config, send, reboot, repl)
         and the watchdog feed

plus one task per extra interface in `faces` (the BLE port, `tssbfw.ble`): each hands its
packets to the same node and gets the node's periodic packets as the radio does.

Boot order (`boot()`): config and identity from flash (keypair created on first boot),
board definition, power rail, modem, flash store, node, bridge, BLE; then `run()`.

The console: on the ESP32 ports a byte equal to the interrupt character (Ctrl-C, 0x03)
arriving on the REPL console raises KeyboardInterrupt in the running program
(esp32-board-budget.md, "Console and tasks"). The bridge shares that console, and every
link TX frame carries 0x03 as its type, so `main()` turns the interrupt character off
while the firmware runs (`micropython.kbd_intr(-1)`) and back on when it ends. The way
back to the REPL is the `repl` command (`tssb reboot --repl`): it leaves a request on
flash and resets; the next boot sees it, starts nothing (no watchdog either) and returns
to the REPL, where mpremote works; the boot after that starts the firmware again.
"""
import asyncio
import json

from tinyssb.errors import WireError
from tinyssb.frames import add_crc
from tssbfw import VERSION
from tssbfw import config as configmod
from tssbfw import regions
from tssbfw.airtime import plan_airtime_ms
from tssbfw.bridge import NullBridge
from tssbfw.limiter import TxLimiter
from tssbfw.radio import RadioPort, make_modem
from tssbfw.scheduler import Scheduler

ROOT = "/tssb"          # config, identity and feeds live under this directory
IDLE_MS = 50            # longest sleep of the tx and host loops
WDT_TIMEOUT_MS = 30000  # a loop stalled this long resets the board
RESET_DELAY_MS = 200    # after a reboot/repl reply: time for it to leave the USB buffer
HEARD_SHOWN = 5         # frames heard lately in `info` (each ~40 bytes of its reply)
EPOCH_2000_MS = 946684800000   # an event "ts" below this is uptime: the host's TIME came later
INTERRUPT_CHAR = 3      # Ctrl-C: what MicroPython's REPL uses, restored when the firmware ends
# Config changes that take effect only at the next boot (the reply says "restart").
RESTART_KEYS = ("plan", "board", "capacity", "ble", "ble_name", "power", "sf")


def _rand_fn():
    try:
        import random
        return lambda n: random.getrandbits(16) % n if n > 1 else 0
    except ImportError:  # pragma: no cover
        return lambda n: 0


async def _sleep_ms(ms, scale=1):
    await asyncio.sleep(ms / 1000 / scale)


class Firmware:
    def __init__(self, plan, link, modem, clock, events=None, rand=None, bridge=None,
                 wdt=None, tick_ms=100, cfg=None, root=None, time_scale=1):
        """Args:
            plan: regions.plan(...), or None when no region is configured: then the
                radio stays off (no modem, nothing queued or sent; the node still runs
                for the USB bridge and BLE);
            link: corelink.NodeLink; modem: async lora driver (None with no plan);
            clock: object with now() ms; events: DeviceEvents or None;
            rand: function(n); bridge: bridge adapter; wdt: object with feed() or None;
            cfg, root: the config dict and its directory (for config_set), optional.
            time_scale: how much faster than real time `clock` runs (simulations and
                tests use a scaled Clock; sleeps shrink by the same factor).
        """
        self.time_scale = time_scale
        self.plan = plan
        self.link = link
        self.modem = modem
        self.clock = clock
        self.events = events
        self.bridge = bridge or NullBridge()
        self.wdt = wdt
        self.tick_ms = tick_ms
        self.cfg = cfg if cfg is not None else {}
        self.root = root
        self.rand = rand or _rand_fn()
        self.port = RadioPort(plan, events)
        self.limiter = self.sched = None
        if plan is not None:
            self.limiter = TxLimiter(plan["limits"])
            self.sched = Scheduler(lambda n: plan_airtime_ms(plan, n), self.limiter, self.rand)
        self.counters = {"enqueue_bad": 0}
        self.faces = []   # other interfaces of the node: send(pkt), status(), run(fw)
        self.reset = None     # function() resetting the board (default machine.reset)
        self._after = None    # "reboot" or "repl" once such a command was answered
        self._limited_seen = 0
        self._running = False

    # -- synchronous steps (also used by the simulator and tests) ----------------------
    def enqueue(self, pkt):
        """Frame a packet and queue it; returns the drop reason or None."""
        if self.sched is None:   # no region plan: the radio must not transmit
            self.counters["radio_off"] = self.counters.get("radio_off", 0) + 1
            return "radio_off"
        try:
            frame = add_crc(pkt)
        except WireError:
            self.counters["enqueue_bad"] += 1
            return "enqueue_bad"
        reason = self.sched.push(frame)
        if reason is not None:
            self.counters[reason] = self.counters.get(reason, 0) + 1
        return reason

    def on_rx(self, rx, now_ms):
        """Process one received frame (RxPacket or bytes)."""
        pkt = self.port.accept(rx)
        if pkt is None:
            return
        self.bridge.on_radio_rx(pkt, rx)
        for p in self.link.on_packet(pkt, now_ms):
            self.enqueue(p)

    def on_tick(self, now_ms):
        for p in self.link.tick(now_ms):
            self.enqueue(p)
            for f in self.faces:
                f.send(p)

    def next_frame(self, now_ms):
        """The frame to transmit now, or None; emits duty_wait when the limiter waits."""
        if self.sched is None:
            return None
        f = self.sched.pop(now_ms)
        lim = self.sched.counters["limited"]
        if lim != self._limited_seen:
            self._limited_seen = lim
            if self.events is not None:
                self.events.emit("duty_wait", wait_ms=self.sched.last_wait_ms)
        return f

    # -- host commands (through the bridge) --------------------------------------------
    def status(self):
        store = self.link.store
        on = self.sched is not None
        st = {"plan": self.plan["name"] if on else None, "feeds": len(store.feeds()),
              "store_used": getattr(store, "used", None),
              "queue": len(self.sched) if on else 0, "radio": dict(self.port.counters),
              "sched": dict(self.sched.counters) if on else {},
              "node": self.link.node_counters(),
              "duty_used_ms": self.limiter.used_ms(self.clock.now()) if on else 0,
              "now_ms": self.clock.now()}
        if not on:
            st["radio_off"] = "no region plan: tssb config set plan NAME, then restart"
        for f in self.faces:
            st[f.name] = f.status()
        return st

    def info(self):
        """What `tssb info` shows: board, firmware, radio settings, uptime, store, flash,
        heap, BLE and the frames heard lately; small enough for one link reply."""
        store = self.link.store
        feeds = store.feeds()
        entries = 0
        for f in feeds:
            entries += store.front(f)[0]
        p = self.plan
        author = getattr(self.link.node, "author", None)
        d = {"board": self.cfg.get("board"), "fw": VERSION,
             "name": self.events.log.node if self.events is not None else None,
             "fid": author.fid.hex() if author is not None else None,
             "plan": p["name"] if p else None, "power": p["power"] if p else None,
             "sf": p["sf"] if p else None, "uptime_ms": self.clock.now(),
             "feeds": len(feeds), "entries": entries,
             "store_used": getattr(store, "used", None),
             "store_capacity": getattr(store, "capacity", None),
             "flash": _flash(self.root), "heap": _heap(),
             "rx": self.port.counters["rx"], "tx": self.port.counters["tx"],
             "duty_used_ms": self.limiter.used_ms(self.clock.now()) if p else 0,
             "heard": self._heard()}
        for f in self.faces:
            d[f.name] = f.status().get("clients")
        return d

    def _heard(self):
        """The last HEARD_SHOWN frames heard on air, newest first, from the event ring:
        [ms ago, kind, bytes, rssi dBm, snr dB]."""
        ev = self.events
        out = []
        if ev is None:
            return out
        up = self.clock.now()
        for line in reversed(ev.ring):
            if '"rx"' not in line:
                continue
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if r.get("event") == "rx":
                ts = r.get("ts", 0)
                ago = up - ts if ts < EPOCH_2000_MS else ev.epoch_ms + up - ts
                out.append([ago, r.get("kind"), r.get("length"), r.get("rssi"),
                            r.get("snr")])
                if len(out) == HEARD_SHOWN:
                    break
        return out

    def command(self, cmd):
        """Run one bridge command tuple (name, arguments...); returns its result.

        Never raises on what a host sends: an unknown command, a wrong number or type of
        arguments, a bad value, or a failure while carrying it out (the flash full, say)
        gives {"error": reason}, and the host task goes on.
        """
        try:
            spec = None
            if isinstance(cmd, tuple) and cmd and isinstance(cmd[0], str):
                spec = COMMANDS.get(cmd[0])
            if spec is None:
                return {"error": "unknown command"}
            least, most, method = spec
            if not least <= len(cmd) - 1 <= most:
                return {"error": "%s takes %d to %d arguments" % (cmd[0], least, most)}
            return getattr(self, method)(*cmd[1:])
        except ValueError as e:  # a refusal: its message says why
            return {"error": str(e)}
        except Exception as e:   # MemoryError and OSError included: report, carry on
            return {"error": "%s: %s" % (type(e).__name__, e)}

    def _send(self, pkt):
        if not isinstance(pkt, (bytes, bytearray, memoryview)):
            raise ValueError("send takes the packet's bytes")
        return {"queued": self.enqueue(bytes(pkt)) is None}

    def _config_get(self, key=None):
        if key is None:
            return dict(self.cfg)
        if key not in configmod.DEFAULTS:
            raise ValueError("unknown config key %r" % (key,))
        return self.cfg.get(key)

    def _config_set(self, key, value):
        return self._config_set_many({key: value})

    def _config_set_many(self, values):
        """Check every value, save them together (or none), say whether a restart is due."""
        values = configmod.check_many(values)
        new = dict(self.cfg)
        new.update(values)
        if self.root is not None:
            configmod.save(self.root, new)
        self.cfg.update(values)
        restart = False
        for k in values:
            restart = restart or k in RESTART_KEYS
        return {"ok": True, "restart": restart}

    def _set_epoch(self, epoch_ms):
        if not isinstance(epoch_ms, int) or isinstance(epoch_ms, bool) or epoch_ms < 0:
            raise ValueError("set_epoch takes Unix milliseconds")
        if self.events is not None:
            self.events.set_epoch(epoch_ms)
        return {"ok": True}

    def _reboot(self):
        self._after = "reboot"
        return {"ok": True}

    def _repl(self):
        if self.root is None:
            raise ValueError("no flash to keep the request on")
        configmod.request_repl(self.root)   # here: a full flash is an error reply
        self._after = "repl"
        return {"ok": True}

    async def _restart(self):
        """Reset the board once a reboot or repl command has been answered."""
        await _sleep_ms(RESET_DELAY_MS)   # real time: the reply must leave the USB buffer
        if self.reset is not None:
            self.reset()
        else:
            import machine
            machine.reset()

    # -- asyncio tasks ---------------------------------------------------------------
    async def _rx_task(self):
        while self._running:
            rx = await self.modem.recv()
            if rx is not None:
                self.on_rx(rx, self.clock.now())

    async def _tx_task(self):
        while self._running:
            now = self.clock.now()
            f = self.next_frame(now)
            if f is not None:
                await self.modem.send(f)
                self.port.sent(f)
                self.bridge.on_radio_tx(f)
                continue
            due = self.sched.due_in(now)
            await _sleep_ms(IDLE_MS if due is None else max(1, min(due, IDLE_MS)), self.time_scale)

    async def _tick_task(self):
        while self._running:
            now = self.clock.now()
            self.on_tick(now)
            wait = self.link.next_deadline(now) - now
            await _sleep_ms(max(1, min(wait, self.tick_ms)), self.time_scale)

    async def _host_task(self):
        while self._running:
            for cmd in self.bridge.poll():
                self.bridge.reply(cmd, self.command(cmd))
            if self._after is not None:
                await self._restart()
            if self.wdt is not None:
                self.wdt.feed()
            await _sleep_ms(IDLE_MS, self.time_scale)

    async def run(self, duration_ms=None):
        """Run the tasks; forever, or for `duration_ms` (tests, simulations)."""
        self._running = True
        loops = (self._rx_task, self._tx_task) if self.modem is not None else ()
        tasks = [asyncio.create_task(t()) for t in
                 loops + (self._tick_task, self._host_task)]
        tasks += [asyncio.create_task(f.run(self)) for f in self.faces]
        try:
            if duration_ms is None:
                await asyncio.gather(*tasks)
            else:
                await _sleep_ms(duration_ms, self.time_scale)
        finally:
            self._running = False
            for t in tasks:
                t.cancel()
            for t in tasks:
                try:
                    await t
                except BaseException:  # CancelledError differs between ports
                    pass


# Bridge commands: name -> (fewest arguments, most arguments, Firmware method). Anything
# else is refused with an error reply.
COMMANDS = {
    "status": (0, 0, "status"),
    "info": (0, 0, "info"),
    "send": (1, 1, "_send"),
    "config_get": (0, 1, "_config_get"),
    "config_set": (2, 2, "_config_set"),
    "config_set_many": (1, 1, "_config_set_many"),
    "set_epoch": (1, 1, "_set_epoch"),
    "reboot": (0, 0, "_reboot"),
    "repl": (0, 0, "_repl"),
}


def _flash(root):
    """[free, total] bytes of the filesystem holding `root`, or None."""
    try:
        import os
        st = os.statvfs(root)
        return [st[0] * st[3], st[0] * st[2]]
    except (AttributeError, OSError, TypeError):
        return None


def _heap():
    """[free, used] bytes of the MicroPython heap after a collection, or None (CPython
    has no such figures)."""
    try:
        import gc
        gc.collect()
        return [gc.mem_free(), gc.mem_alloc()]
    except AttributeError:
        return None


def boot(root=ROOT, lora_mod=None, machine_mod=None, bridge=None, clock=None,
         node_factory=None, urandom=None, store_factory=None, bluetooth_mod=None):
    """Bring a node up from what is on flash.

    BLE starts when the config says so ("ble", default on); a board or port without a
    usable `bluetooth` module runs without it and says why in the problems.

    Returns:
        (Firmware, list of boot problems).
    Raises:
        ValueError: no board configured (deploy writes one) or bad board/plan.
    """
    import tssb_boards
    from tssbfw import corelink, power
    from tssbfw.clock import Clock
    from tssbfw.events import DeviceEvents
    from tssbfw.flashstore import FlashStore

    cfg, problems = configmod.load(root)
    if not cfg["board"]:
        raise ValueError("no board configured in %s/config.json" % root)
    board = tssb_boards.get(cfg["board"])
    plan = None
    if cfg["plan"] is None:
        problems.append("no region plan: radio off until `tssb config set plan NAME` "
                        "and a restart")
    else:
        plan = regions.plan(cfg["plan"], cfg["power"], cfg["sf"])
    c = corelink.crypto()
    seed, pub, created = configmod.load_identity(root, c.publickey, urandom)
    if created:
        problems.append("created identity")
    clock = clock or Clock()
    bridge = bridge or NullBridge()
    name = cfg["name"] or ("tssb-" + pub[:4].hex())
    events = DeviceEvents(name, clock, bridge.on_event)
    power.power_up(board, machine_mod)
    modem = None if plan is None else make_modem(board, plan, lora_mod, machine_mod)
    store = (store_factory or FlashStore)(root + "/feeds", capacity=cfg["capacity"],
                                          events=events)
    link = corelink.NodeLink(store, (seed, pub), events, node_factory=node_factory)
    wdt = None
    if machine_mod is None:
        try:
            import machine
            wdt = machine.WDT(timeout=WDT_TIMEOUT_MS)
        except (ImportError, AttributeError):
            wdt = None
    else:
        wdt = machine_mod.WDT(timeout=WDT_TIMEOUT_MS)
    fw = Firmware(plan, link, modem, clock, events, bridge=bridge, wdt=wdt,
                  tick_ms=cfg["tick_ms"], cfg=cfg, root=root,
                  time_scale=getattr(clock, "scale", 1))
    if machine_mod is not None:
        fw.reset = machine_mod.reset
    if cfg["ble"]:
        try:
            from tssbfw.ble import BlePort
            fw.faces.append(BlePort(fw, pub, cfg["ble_name"], bluetooth_mod))
        except (ImportError, OSError, ValueError) as e:
            problems.append("BLE off: %s" % e)
    return fw, problems


def usb_bridge(name="board", info=None):
    """SerialBridge on the USB serial console (sys.stdin/stdout), read without blocking.

    The console carries the framed link protocol once the node runs; stray REPL output
    between frames is skipped by the host's decoder (it resynchronises on FEND).
    """
    import select
    import sys
    from tssbfw.bridge import SerialBridge
    src = getattr(sys.stdin, "buffer", sys.stdin)
    out = getattr(sys.stdout, "buffer", sys.stdout)
    poller = select.poll()
    poller.register(sys.stdin, select.POLLIN)

    def read(n):
        data = bytearray()
        while len(data) < n and poller.poll(0):
            b = src.read(1)
            if not b:
                break
            data.extend(b)
        return bytes(data) if data else None

    return SerialBridge(read, out.write, name, info)


def _console_interrupt(char):
    """Set the console's interrupt character (-1: off); a no-op off MicroPython."""
    try:
        import micropython
        micropython.kbd_intr(char)
    except (ImportError, AttributeError):
        pass


def main(root=ROOT):
    if configmod.take_repl_request(root):
        print("tssb: firmware not started: the REPL was asked for (tssb reboot --repl); "
              "reset the board to start it")
        return
    # The host's frames carry 0x03 (TX): as the console's interrupt character it would
    # stop the firmware (see the module's docstring). Off from the first byte the host
    # may send, on again whenever the firmware ends.
    _console_interrupt(-1)
    try:
        bridge = usb_bridge()
        fw, problems = boot(root, bridge=bridge)
        bridge.name = fw.events.log.node
        author = getattr(fw.link.node, "author", None)
        bridge.info = {"board": fw.cfg["board"], "fw": VERSION}
        if author is not None:
            bridge.info["fid"] = author.fid.hex()
        bridge.attach(fw)
        for p in problems:
            print("tssb:", p)  # console text between frames; the host skips it
        bridge.say_hello()
        asyncio.run(fw.run())
    finally:
        _console_interrupt(INTERRUPT_CHAR)
