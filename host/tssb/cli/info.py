"""`tssb info`: the attached board at a glance (what a Meshtastic user gets from --info)."""
import json

from tssb.cli import EXIT_FAILURE, CliError, _board as board


def register(subparsers):
    p = subparsers.add_parser(
        "info", help="show the board: type, firmware, region and radio, uptime, store, "
                     "flash, heap, BLE, what it heard",
        description="Ask the board on USB (auto-detected unless --port; through the running "
                    "`tssb bridge` of this home when it holds the board) what it is and how "
                    "it is doing: board name and type, firmware version, its region plan and "
                    "what the plan means (frequency, bandwidth, duty cycle or dwell limit), "
                    "TX power and spreading factor, uptime, feeds and entries, free flash "
                    "and heap, BLE clients, and the last frames it heard with their RSSI "
                    "and SNR.")
    p.add_argument("--port", metavar="P", help="serial port (default: auto-detect)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def _kb(n):
    return "%.1f KB" % (n / 1024) if n < 1 << 20 else "%.2f MB" % (n / (1 << 20))


def _uptime(ms):
    s = ms // 1000
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return ("%d d " % d if d else "") + "%02d:%02d:%02d" % (h, m, s)


def gather(args):
    """The board's info answer, with the host's reading of it added (board title and
    chip, the plan's meaning). Raises: CliError."""
    import tssb_boards
    from tssb.cli.regions import describe
    from tssbfw import regions
    d = board.ask(args, ["cmd", "info"])
    if not isinstance(d, dict):
        raise CliError("the board answered %r, not its info" % (d,), EXIT_FAILURE)
    try:
        b = tssb_boards.get(d.get("board") or "")
        d["board_title"], d["mcu"], d["radio"] = b["title"], b["mcu"], b["radio"]
    except ValueError:
        pass
    try:
        d["region"] = describe(regions.plan(d["plan"], d.get("power"), d.get("sf")))
    except (ValueError, TypeError, KeyError):
        d["region"] = None
    return d


def lines(d):
    """The info as lines of text."""
    out = []
    if "board_title" in d:
        out.append(("board", "%s (%s, %s, %s)" % (d["board"], d["board_title"],
                                                  d["mcu"].upper(), d["radio"].upper())))
    else:
        out.append(("board", str(d.get("board"))))
    out.append(("firmware", "tinySSB %s, node %s, feed %s" % (
        d.get("fw"), d.get("name"), (d.get("fid") or "?")[:16])))
    r = d.get("region")
    if r is None:
        out.append(("region", "none: the radio is off (`tssb regions`, then `tssb config set "
                              "plan NAME` and `tssb reboot`)"))
    else:
        out.append(("region", "%s: %.3f MHz, %g kHz, CR %s, sync %s; %s: %s" % (
            r["plan"], r["freq_mhz"], r["bw_khz"], r["cr"], r["sync"], r["rule"], r["rules"])))
        out.append(("radio", "%d dBm, SF%d, %d ms per full frame; airtime used this hour "
                             "%.1f s" % (d["power"], d["sf"], r["frame_airtime_ms"],
                                         d.get("duty_used_ms", 0) / 1000)))
    out.append(("uptime", _uptime(d.get("uptime_ms") or 0)))
    out.append(("store", "%d feeds, %d entries, %s of %s used" % (
        d.get("feeds", 0), d.get("entries", 0), _kb(d.get("store_used") or 0),
        _kb(d.get("store_capacity") or 0))))
    if d.get("flash"):
        out.append(("flash", "%s free of %s" % (_kb(d["flash"][0]), _kb(d["flash"][1]))))
    if d.get("heap"):
        out.append(("heap", "%s free, %s used" % (_kb(d["heap"][0]), _kb(d["heap"][1]))))
    out.append(("ble", "off" if "ble" not in d else "%d client(s)" % d["ble"]))
    out.append(("frames", "%d heard, %d sent" % (d.get("rx", 0), d.get("tx", 0))))
    for ago, kind, n, rssi, snr in d.get("heard") or []:
        out.append(("heard", "%5.1f s ago  %-7s %3s B  %s dBm  %s dB" % (
            (ago or 0) / 1000, kind, n, rssi, snr)))
    return out


def run(args):
    d = gather(args)
    if args.json:
        print(json.dumps(d))
        return 0
    for k, v in lines(d):
        print("%-9s %s" % (k, v))
    return 0
