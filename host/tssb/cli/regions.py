"""`tssb regions`: every LoRa region plan a board can be set to, and what each means."""
import json

from tssb.cli import CliError

FRAME = 124    # the longest tinySSB frame: a 120-byte entry or chunk and its CRC32


def register(subparsers):
    p = subparsers.add_parser(
        "regions", help="list the LoRa region plans: frequency, SF, bandwidth, legal limits",
        description="List every region plan the firmware knows (`tssb deploy --plan`, "
                    "`tssb config set plan`): its frequency, bandwidth, spreading factor, "
                    "coding rate, sync word and TX power as deployed tinySSB nodes use "
                    "them, and the band's rules the board enforces (duty cycle or dwell "
                    "time, power cap), with the airtime of a full 124-byte frame. All nodes "
                    "of a mesh must use the same plan. A board has no plan until you give "
                    "it one: its radio stays off.")
    p.add_argument("plan", metavar="PLAN", nargs="?", help="show only this plan")
    p.add_argument("--json", action="store_true", help="print JSON (one object per plan)")
    p.set_defaults(func=run)


def rules_text(limits):
    """The band's rules in words."""
    parts = []
    duty = limits.get("duty_permille")
    if duty:
        window_s = limits["window_ms"] // 1000
        parts.append("%g %% duty cycle (%d s of airtime per %s)" % (
            duty / 10, window_s * duty // 1000, "hour" if window_s == 3600 else
            "%d s" % window_s))
    if limits.get("dwell_ms"):
        parts.append("at most %d ms of airtime per frame (dwell time)" % limits["dwell_ms"])
    if not parts:
        parts.append("no duty cycle or dwell limit")
    parts.append("max %d dBm" % limits["max_dbm"])
    return ", ".join(parts)


def describe(plan):
    """A plan (tssbfw.regions.plan(...)) as a JSON-able dict with its meaning."""
    from tssbfw.airtime import plan_airtime_ms
    lim = plan["limits"]
    return {"plan": plan["name"], "freq_mhz": plan["freq"] / 1e6, "bw_khz": plan["bw"] / 1000,
            "sf": plan["sf"], "cr": "4/%d" % plan["cr"], "sync": "0x%02x" % plan["sync"],
            "power_dbm": plan["power"], "rule": plan["rule"],
            "duty_cycle_percent": lim["duty_permille"] / 10 if lim["duty_permille"] else None,
            "dwell_ms": lim["dwell_ms"], "max_dbm": lim["max_dbm"],
            "frame_airtime_ms": plan_airtime_ms(plan, FRAME), "rules": rules_text(lim)}


def line(d):
    """One line for a describe() dict."""
    return "%-8s %8.3f MHz %5g kHz SF%-2d CR %s sync %s %2d dBm  %4d ms/frame  %s: %s" % (
        d["plan"], d["freq_mhz"], d["bw_khz"], d["sf"], d["cr"], d["sync"], d["power_dbm"],
        d["frame_airtime_ms"], d["rule"], d["rules"])


def run(args):
    from tssbfw import regions
    names = regions.names()
    if args.plan is not None:
        if args.plan not in names:
            raise CliError("unknown region plan %r (one of %s)" % (args.plan,
                                                                   ", ".join(names)))
        names = [args.plan]
    plans = [describe(regions.plan(n)) for n in names]
    if args.json:
        for d in plans:
            print(json.dumps(d))
        return 0
    for d in plans:
        print(line(d))
    if args.plan is None:
        print("US915.a is what deployed tinySSB nodes use; EU868.a is the usual plan in "
              "Europe. TX power is the plan's, capped by the band (`tssb config set power`).")
    return 0
