"""`tssb-spark ingest|metrics|report` (also `python -m tssb_spark`, or as a spark-submit
application: `spark-submit --master URL spark/tssb_spark/cli.py report ...`).

Without --master the session keeps what spark-submit configured, or runs locally on all
cores when started as plain Python. Counts are printed to stdout as one JSON object.
"""
import argparse
import json
import os
import signal
import sys

if __package__ in (None, ""):  # run as a file by spark-submit: make the package importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tssb_spark import VERSION  # noqa: E402
from tssb_spark import ingest as I  # noqa: E402
from tssb_spark import metrics as M  # noqa: E402
from tssb_spark import report as R  # noqa: E402
from tssb_spark import schema as S  # noqa: E402
from tssb_spark.session import get_spark  # noqa: E402


class CliError(Exception):
    """A failure reported to the user as one line (exit status 2)."""


def _progress(msg):
    print("tssb-spark: " + msg, file=sys.stderr, flush=True)


def _conf(items):
    conf = {}
    for item in items or ():
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise CliError("--conf needs KEY=VALUE, got %r" % item)
        conf[k] = v
    return conf


def _spark(args):
    spark = get_spark(args.master, _conf(args.conf))
    if args.quiet:
        spark.sparkContext.setLogLevel("ERROR")
    return spark


def _need_dir(path, what):
    if not os.path.isdir(path):
        raise CliError("%s %s is not a directory" % (what, path))


def cmd_ingest(args):
    _need_dir(args.input, "input")
    spark = _spark(args)
    stats = I.ingest(spark, args.input, args.output, mode=args.mode,
                     max_version=args.schema_version,
                     max_files_per_trigger=args.max_files_per_trigger, progress=_progress)
    print(json.dumps(stats, sort_keys=True))
    return 0


def cmd_metrics(args):
    if not os.path.isdir(os.path.join(args.input, "events")):
        raise CliError("%s is not a lake (no events/ inside); run `tssb-spark ingest` first"
                       % args.input)
    spark = _spark(args)
    out = args.output or os.path.join(args.input, "metrics")
    counts = M.compute(spark, I.read_events(spark, args.input), out, args.match_window_ms,
                       progress=_progress)
    print(json.dumps(counts, sort_keys=True))
    return 0


def cmd_report(args):
    _need_dir(args.input, "input")
    spark = _spark(args)
    try:
        path = R.build(args.input, args.output, spark=spark, lake=args.lake, mode=args.mode,
                       window_ms=args.match_window_ms, progress=_progress)
    except ValueError as e:
        raise CliError(str(e))
    print(json.dumps({"report": path}))
    return 0


def build_parser():
    p = argparse.ArgumentParser(
        prog="tssb-spark",
        description="Spark pipeline of the tinySSB toolkit: ingest JSONL event logs of "
                    "boards, simulator and host sessions into a Parquet lake (bad lines go "
                    "to a quarantine table), compute network metrics, draw an HTML report.")
    p.add_argument("--version", action="version", version="tssb-spark " + VERSION)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--master", help="Spark master URL, e.g. local[2] or spark://host:7077 "
                        "(default: spark-submit's setting, else local[*])")
    common.add_argument("--conf", action="append", metavar="KEY=VALUE",
                        help="extra Spark setting (repeatable)")
    common.add_argument("--quiet", action="store_true", help="only Spark errors on stderr")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    def mode(sp):
        sp.add_argument("--mode", choices=I.MODES, default="stream",
                        help="stream: Structured Streaming, trigger availableNow, checkpointed "
                             "(default); batch: one batch read")

    def window(sp):
        sp.add_argument("--match-window-ms", type=int, default=M.DEFAULT_MATCH_WINDOW_MS,
                        help="max ms from a tx to its rx for the delivery metric "
                             "(default %(default)s)")

    i = sub.add_parser("ingest", parents=[common],
                       help="JSONL logs -> Parquet lake (events + quarantine)",
                       description="Ingest every *.jsonl file under INPUT into the lake "
                                   "OUTPUT. Re-ingesting the same files adds nothing.")
    i.add_argument("--input", required=True, help="directory of JSONL logs (recursive)")
    i.add_argument("--output", required=True, help="lake directory")
    mode(i)
    i.add_argument("--schema-version", type=int, choices=S.versions(), default=S.LATEST,
                   help="newest schema version accepted (default %(default)s)")
    i.add_argument("--max-files-per-trigger", type=int,
                   default=I.DEFAULT_MAX_FILES_PER_TRIGGER,
                   help="files per micro-batch in stream mode (default %(default)s)")
    i.set_defaults(func=cmd_ingest)

    m = sub.add_parser("metrics", parents=[common], help="lake -> metric tables (Parquet)",
                       description="Compute airtime/duty cycle, delivery per link, "
                                   "replication latency, GOSET convergence and session "
                                   "stats from the lake INPUT.")
    m.add_argument("--input", required=True, help="lake directory (from ingest)")
    m.add_argument("--output", help="metrics directory (default INPUT/metrics)")
    window(m)
    m.set_defaults(func=cmd_metrics)

    r = sub.add_parser("report", parents=[common],
                       help="logs -> lake -> metrics -> HTML report with PNG plots",
                       description="Run the whole pipeline on the JSONL logs in INPUT and "
                                   "write OUTPUT/index.html with its plots.")
    r.add_argument("--input", required=True, help="directory of JSONL logs (recursive)")
    r.add_argument("--output", required=True, help="report directory")
    r.add_argument("--lake", help="lake directory (default OUTPUT/lake)")
    mode(r)
    window(r)
    r.set_defaults(func=cmd_report)
    return p


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        sys.exit(2)
    interrupted = []

    def on_sigint(signum, frame):
        # Ctrl-C reaches the JVM too (same process group): py4j then fails with its own
        # errors and logs them with tracebacks. Remember it, and keep them quiet.
        interrupted.append(signum)
        import logging
        logging.getLogger("py4j").setLevel(logging.CRITICAL)
        raise KeyboardInterrupt
    signal.signal(signal.SIGINT, on_sigint)
    try:
        status = args.func(args)
    except CliError as e:
        print("tssb-spark: error: %s" % e, file=sys.stderr)
        status = 2
    except KeyboardInterrupt:
        print("tssb-spark: interrupted", file=sys.stderr)
        status = 130
    except Exception:
        if not interrupted:
            raise
        print("tssb-spark: interrupted", file=sys.stderr)
        status = 130
    sys.exit(status or 0)


if __name__ == "__main__":
    main()
