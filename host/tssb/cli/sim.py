"""`tssb sim SCENARIO.toml`: run the LoRa mesh simulator and print a summary."""
import json
import os
import sys

from tssb.cli import CliError


def register(sub):
    p = sub.add_parser(
        "sim", help="simulate a LoRa mesh of tinySSB boards from a scenario file",
        description="Run N simulated boards (the real tinySSB node, firmware scheduler and "
                    "duty-cycle limiter) on a virtual LoRa channel with airtime, collisions, "
                    "capture, half-duplex radios, path loss and shadowing, optionally moving "
                    "boards. SCENARIO is a TOML file or the name of a bundled one (demo, "
                    "small, random50, mule). The run is "
                    "deterministic for the scenario's seed.")
    p.add_argument("scenario", help="scenario TOML file, or a bundled scenario name")
    p.add_argument("--logs", metavar="DIR",
                   help="write one JSONL event log per board into DIR (default: none)")
    p.add_argument("--seed", type=int, help="override the scenario's seed")
    p.add_argument("--duration", type=float, metavar="SECONDS",
                   help="override the scenario's virtual duration")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=_run)


def bundled():
    """Names of the bundled scenarios."""
    from tssb import sim
    d = os.path.dirname(sim.scenario_path("x"))
    return sorted(f[:-5] for f in os.listdir(d) if f.endswith(".toml"))


def _load(name):
    from tssb import sim
    path = name
    if not os.path.exists(path) and os.sep not in name and not name.endswith(".toml"):
        if name not in bundled():
            raise CliError("no scenario file %s and no bundled scenario of that name "
                           "(bundled: %s)" % (name, ", ".join(bundled())))
        path = sim.scenario_path(name)
    try:
        return sim.scenario.load(path)
    except sim.ScenarioError as e:
        raise CliError("scenario %s" % e)


def unreachable(runner, sc):
    """(board, author) pairs with no path at the start positions (none when boards move)."""
    if sc.get("mobility") and sc["mobility"].get("model", "none") != "none":
        return []
    out = []
    for a in sorted(sc["authors"]):
        hops = runner.hops(a)
        out += [(i, a) for i, h in enumerate(hops) if h < 0]
    return out


def _run(args):
    from tssb import sim
    if args.logs and os.path.exists(args.logs) and not os.path.isdir(args.logs):
        raise CliError("--logs wants a directory; %s is a file" % args.logs)
    sc = _load(args.scenario)
    if args.seed is not None:
        sc["seed"] = args.seed
    if args.duration is not None:
        if not 0 < args.duration <= sim.scenario.MAX_DURATION_S:
            raise CliError("--duration must be in 0..%d s" % sim.scenario.MAX_DURATION_S)
        sc["duration_ms"] = int(args.duration * 1000)

    def progress(now, until):
        if not args.quiet:
            print("  %6.0f s of %.0f s virtual" % (now / 1000, until / 1000),
                  file=sys.stderr, flush=True)

    try:
        runner = sim.Simulator(sc, logdir=args.logs)
    except sim.ScenarioError as e:
        raise CliError("scenario %s" % e)
    cut = unreachable(runner, sc)
    if cut:
        boards = sorted({i for i, _ in cut})
        print("warning: %d board(s) (%s) cannot hear any path to an author: the topology "
              "is disconnected at this spacing and radio, so the run cannot converge"
              % (len(boards), ", ".join(map(str, boards[:10])) + (" ..." if len(boards) > 10
                                                                  else "")),
              file=sys.stderr, flush=True)
    s = runner.run(progress=progress, progress_every_ms=max(min(sc["duration_ms"] // 10, 60000), 1000))
    if args.json:
        print(json.dumps(s, indent=1, sort_keys=True))
    else:
        for line in summary_lines(s):
            print(line)
    return 0 if s["converged"] else 1


def summary_lines(s):
    """A summary a person can read (also used by the demo)."""
    out = ["sim %s: %d boards, plan %s, seed %d, %d posts"
           % (s["scenario"], s["nodes"], s["plan"], s["seed"], s["posts"])]
    if s.get("moving"):
        out.append("  mobility: %s, %d of %d boards moving"
                   % (s["mobility"].replace("_", " "), s["moving"], s["nodes"]))
    if s["converged"]:
        out.append("  converged after %.1f s virtual (GOSET agreed at %.1f s)"
                   % (s["converge_ms"] / 1000, (s["goset_ms"] or 0) / 1000))
    else:
        out.append("  NOT converged within %.1f s virtual" % (s["end_ms"] / 1000))
    d = s["delivery"]
    if not d["attempts"]:
        out.append("  no board was in range of another: no frame could be received "
                   "(check the topology's spacing against the radio's range)")
    out.append("  %d frames, %d bytes, %.1f s airtime; delivery ratio %.1f%% "
               "(%d of %d receptions; lost: %s)"
               % (s["frames"], s["bytes"], s["airtime_ms"] / 1000, 100 * d["ratio"],
                  d["delivered"], d["attempts"],
                  ", ".join("%s %d" % kv for kv in sorted(d["lost"].items()))))
    out.append("  airtime share per packet kind:")
    for k, v in sorted(s["by_kind"].items(), key=lambda kv: -kv[1]["airtime_ms"]):
        out.append("    %-8s %5.1f%%  %6d frames %8.1f s"
                   % (k, 100 * s["airtime_share"][k], v["frames"], v["airtime_ms"] / 1000))
    out.append("  entries and chunks: %.1f%% of airtime, GOSET/WANT/CHNK: %.1f%%"
               % (100 * s["payload_share"], 100 * (1 - s["payload_share"])))
    return out
