"""`tssb-spark ingest|metrics|report|quarantine` (also `python -m tssb_spark`, or as a
spark-submit application: `spark-submit --master URL spark/tssb_spark/cli.py report ...`).

Without --master the session keeps what spark-submit configured, or runs locally on all
cores when started as plain Python. Counts are printed to stdout as one JSON object,
progress to stderr; with --quiet the JVM's own output (warnings, stage progress bars) goes
to a log file instead of the terminal.
"""
import argparse
import json
import os
import signal
import sys
import tempfile

if __package__ in (None, ""):  # run as a file by spark-submit: make the package importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tssb_spark import VERSION  # noqa: E402
from tssb_spark import ingest as I  # noqa: E402
from tssb_spark import metrics as M  # noqa: E402
from tssb_spark import report as R  # noqa: E402
from tssb_spark import schema as S  # noqa: E402
from tssb_spark import tail as TAIL  # noqa: E402
from tssb_spark.session import get_spark, merged_conf  # noqa: E402

# Lines of a quarantined record shown by `tssb-spark quarantine`, and their width.
SAMPLE_LINES = 3
SAMPLE_WIDTH = 160
# Only errors from log4j, and no stage progress bars, under --quiet.
QUIET_LOG4J = """rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


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
    spark = _session(args)
    # Building a SparkContext installs PySpark's SIGINT handler; ours again (main thread).
    if signal.getsignal(signal.SIGINT) is not _on_sigint:
        try:
            signal.signal(signal.SIGINT, _on_sigint)
        except ValueError:       # not the main thread: leave PySpark's
            pass
    return spark


def _session(args):
    conf = _conf(args.conf)
    if not args.quiet:
        return get_spark(args.master, conf)
    # The JVM writes warnings and progress bars straight to the terminal before any log
    # level can be set: start it with an error-only log4j setup and its stderr in a file.
    logdir = tempfile.mkdtemp(prefix="tssb-spark-")
    cfg = os.path.join(logdir, "log4j2.properties")
    with open(cfg, "w") as f:
        f.write(QUIET_LOG4J)
    conf = merged_conf(conf, {"spark.driver.extraJavaOptions":
                              "-Dlog4j.configurationFile=file:%s" % cfg})
    conf.setdefault("spark.ui.showConsoleProgress", "false")
    log = os.path.join(logdir, "spark.log")
    saved = os.dup(2)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.dup2(fd, 2)          # inherited by the JVM this call starts
        spark = get_spark(args.master, conf)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _need_dir(path, what):
    if not os.path.isdir(path):
        raise CliError("%s %s is not a directory" % (what, path))


def _need_logs(path):
    """Fail fast (before starting Spark) when a local input holds no event log at all."""
    if not I._local(path):
        return
    for base, _, files in os.walk(path):
        if any(n.endswith(I.FILE_GLOB[1:]) or n.endswith(TAIL.LIVE_SUFFIX) for n in files):
            return
    raise CliError("no event logs under %s (expected *.jsonl files, or *.jsonl.live files "
                   "still being written)" % path)


def _all_bad(stats, lake):
    """The one line for an ingest that found lines but not one valid event."""
    return ("none of the %d lines under the input is a valid event: %d quarantined in "
            "%s (see `tssb-spark quarantine --lake %s`)"
            % (stats["lines"] - stats["blank"], stats["quarantined"],
               os.path.join(lake, "quarantine"), lake))


def cmd_ingest(args):
    _need_dir(args.input, "input")
    _need_logs(args.input)
    spark = _spark(args)
    stats = I.ingest(spark, args.input, args.output, mode=args.mode,
                     max_version=args.schema_version,
                     max_files_per_trigger=args.max_files_per_trigger, progress=_progress)
    print(json.dumps(stats, sort_keys=True))
    if stats["quarantined"] and not stats["valid"]:
        _progress("warning: " + _all_bad(stats, args.output))
    elif stats["quarantined_new"]:
        _progress("%d new line(s) quarantined: `tssb-spark quarantine --lake %s` shows them"
                  % (stats["quarantined_new"], args.output))
    return 0


def cmd_quarantine(args):
    if not os.path.isdir(args.lake):
        raise CliError("lake %s is not a directory" % args.lake)
    spark = _spark(args)
    q = I.read_quarantine(spark, args.lake)
    if q is None:
        print("quarantine of %s is empty" % args.lake)
        return 0
    from pyspark.sql import functions as F
    if args.reason:
        q = q.where(F.col("reason") == args.reason)
    rows = (q.groupBy("reason", "source_file")
            .agg(F.count(F.lit(1)).alias("lines"),
                 F.slice(F.sort_array(F.collect_list("raw")), 1, args.samples).alias("sample"))
            .orderBy(F.desc("lines"), "reason", "source_file").limit(args.limit).collect())
    if not rows:
        print("no quarantined lines%s" % (" with reason %s" % args.reason if args.reason else ""))
        return 0
    total = q.count()
    print("%d quarantined line(s) in %s" % (total, os.path.join(args.lake, "quarantine")))
    for r in rows:
        print("\n%s: %d line(s) in %s" % (r["reason"], r["lines"], r["source_file"]))
        for line in r["sample"]:
            text = line if len(line) <= SAMPLE_WIDTH else line[:SAMPLE_WIDTH - 3] + "..."
            print("    " + text.encode("unicode_escape").decode("ascii"))
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
    _need_logs(args.input)
    spark = _spark(args)
    lake = args.lake or os.path.join(args.output, "lake")
    try:
        path = R.build(args.input, args.output, spark=spark, lake=lake, mode=args.mode,
                       window_ms=args.match_window_ms, progress=_progress)
    except R.NoEvents as e:
        raise CliError(_all_bad(e.stats, lake) if e.stats["quarantined"] else
                       "no valid events under %s and none in the lake %s"
                       % (args.input, lake))
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
    common.add_argument("--quiet", action="store_true",
                        help="no Spark warnings or progress bars on the terminal (the JVM's "
                             "output goes to a log file); errors still show as one line")
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

    q = sub.add_parser("quarantine", parents=[common],
                       help="show quarantined lines: counts by reason and file, samples",
                       description="Show what the ingest quarantined in the lake LAKE: per "
                                   "reason and source file the number of lines and a few "
                                   "of them (docs/events.md lists the reasons).")
    q.add_argument("--lake", required=True, help="lake directory (from ingest)")
    q.add_argument("--reason", help="only this reason, e.g. unparsable or range:length")
    q.add_argument("--samples", type=int, default=SAMPLE_LINES,
                   help="lines shown per reason and file (default %(default)s)")
    q.add_argument("--limit", type=int, default=50,
                   help="(reason, file) groups shown (default %(default)s)")
    q.set_defaults(func=cmd_quarantine)
    return p


_INTERRUPTED = []


def _on_sigint(signum, frame):
    # Ctrl-C lands in the middle of a py4j call: py4j (and PySpark's own handler, which
    # calls the JVM from inside that call) then fail and log tracebacks, on the root
    # logger too. Remember it and keep them quiet: the user gets one line.
    _INTERRUPTED.append(signum)
    import logging
    for name in ("py4j", ""):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    raise KeyboardInterrupt


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        sys.exit(2)
    del _INTERRUPTED[:]
    interrupted = _INTERRUPTED
    signal.signal(signal.SIGINT, _on_sigint)
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
