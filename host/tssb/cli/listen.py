"""`tssb listen`: decoded traffic of the attached board, with RSSI/SNR."""
import json
import logging
import time

from tinyssb.dmx import GOSET_DMX
from tssb.cli import CliError, _board as board

log = logging.getLogger("tssb.bridge")


def register(subparsers):
    p = subparsers.add_parser(
        "listen", help="print the packets the board hears and sends",
        description="Attach to the board (auto-detected unless --port) and print one line "
                    "per packet: time, direction (rx heard on air / tx sent by the board), "
                    "kind, length, DMX, RSSI and SNR. Event lines with --events. Connection changes "
                    "are logged on stderr. Ctrl-C stops.")
    p.add_argument("--port", metavar="P", help="serial port (default: auto-detect)")
    p.add_argument("--baud", type=int, default=115200)
    p.add_argument("--events", action="store_true", help="also print the board's event lines")
    p.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    p.set_defaults(func=run, log_default="info")


def kind_of(pkt):
    """A coarse label from the packet's shape (GOSET by its DMX, 120 bytes: entry/chunk)."""
    if pkt[:7] == GOSET_DMX:
        return "goset"
    if len(pkt) == 120:
        return "entry/chunk"
    return "want/chnk"


def format_message(m, now=None):
    """One output line for a link message, or None for messages not shown."""
    t = time.strftime("%H:%M:%S", time.localtime(now if now is not None else time.time()))
    if m[0] == "rx":
        return "%s rx %-11s %3d B dmx %s rssi %4d dBm snr %5.1f dB" % (
            t, kind_of(m[1]), len(m[1]), m[1][:7].hex(), m[2], m[3] / 4.0)
    if m[0] == "tx":
        return "%s tx %-11s %3d B dmx %s" % (t, kind_of(m[1]), len(m[1]), m[1][:7].hex())
    if m[0] == "hello":   # the board's HELLO: name, firmware, plan, ... as key=value
        d = m[1] if isinstance(m[1], dict) else {}
        return "%s board %s" % (t, " ".join(
            "%s=%s" % (k, json.dumps(v) if not isinstance(v, str) or " " in v else v)
            for k, v in sorted(d.items())))
    if m[0] == "event":
        return "%s event %s" % (t, m[1])
    return None


def run(args):
    from tinyssb import link
    from tssb.bridge.serial_link import SerialLink, open_no_reset
    if args.duration is not None and not args.duration > 0:
        raise CliError("--duration must be positive")
    name = board.choose_port(args.port)

    def show(m):
        if m[0] == "event" and not args.events:
            return
        line = format_message(m)
        if line:
            print(line, flush=True)

    sl = SerialLink(lambda: name, show, hello=link.hello("host", "listen"),
                    opener=lambda p: open_no_reset(p, args.baud),
                    on_state=log.info)
    sl.start()
    try:
        end = None if args.duration is None else time.monotonic() + args.duration
        while end is None or time.monotonic() < end:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        sl.stop()
    return 0
