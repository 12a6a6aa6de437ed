"""Benchmark: validated Spark ingest against plain JSON -> Parquet and a Python baseline.

Usage: python tools/bench_spark.py [--sizes 1e6,1e7] [--master local[2]] [--workdir DIR]
                                   [--repeat K] [--warmup N] [--pieces]

For each size N it writes N synthetic events (a tinySSB mesh mix of tx/rx/append/goset/
want lines, 0.1 % bad lines) as JSONL files, then on the same files in the same run:
  - python: one Python process reads every line, validates it with the same schema rules
    (tssb_spark.schema.validate_line: the same unparsable checks, json.loads, every rule
    of Catalog.validate) and dedupes the valid lines' ids in a set; it writes nothing and
    keeps no quarantine
  - plain: `spark.read.schema(S).json(files)` -> Parquet partitioned by date and node, the
    same schema and partitioning as the lake, no validation, no quarantine, no dedupe
  - ingest: `tssb_spark.ingest` in batch mode into a fresh lake (parse, validate,
    quarantine, dedupe, Parquet partitioned by date and node)
The two Spark cases alternate K times (default 2) and each keeps its best time, so a
neighbour's load on a shared machine hits both alike. Before any timed run both cases run
WARMUP_RUNS times on a warm-up input of N events (--warmup, default 10^6): HotSpot
compiles and recompiles the jobs' generated code over the first millions of rows (a run
in a fresh JVM takes 2-3x as long, plain and ingest alike), and the ingest's code,
being larger, settles later than plain's; with a small warm-up the first timed runs
measure the JIT more than the job. One JSON line per size: events/s of each, "vs_plain" =
ingest / plain and "vs_python" = ingest / python (the issue's bars: 0.7 and 1.3), every
timed run's seconds, and the Parquet bytes of the events table against the JSONL bytes.
The default size (10^6) takes a few minutes on 2 cores; `--sizes 1e7` writes 1.6 GB of
JSONL to the work directory (default: a temporary one, removed afterwards).
"""
import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for sub in ("shared", "spark"):
    p = os.path.join(ROOT, sub)
    if p not in sys.path:
        sys.path.insert(0, p)

from tssb_spark import ingest, schema  # noqa: E402
from tssb_spark.session import get_spark  # noqa: E402

NODES = 16
FILES_PER_NODE = 2
BAD_EVERY = 1000          # one bad line per 1000 (quarantine path stays exercised)
EPOCH = 1735689600000     # 2025-01-01T00:00:00Z; events spread over two days
SPAN_MS = 2 * 24 * 3600 * 1000
DEFAULT_SIZES = "1e6"
DEFAULT_WARMUP = 1000000
WARMUP_RUNS = 2


def generate(directory, n, seed=1):
    """Write n synthetic events as JSONL. Returns (bytes written, lines written)."""
    rnd = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    nodes = ["node%02d" % i for i in range(NODES)]
    feeds = ["%064x" % rnd.getrandbits(256) for _ in range(NODES)]
    files = {}
    for node in nodes:
        for k in range(FILES_PER_NODE):
            files[(node, k)] = open(os.path.join(directory, "%s-%d.jsonl" % (node, k)), "w")
    total = 0
    step = SPAN_MS / float(n)
    counters = dict.fromkeys(nodes, 0)
    for i in range(n):
        node = nodes[i % NODES]
        counters[node] += 1
        ts = EPOCH + int(i * step)
        head = '{"v":1,"id":"%s:b:%d","ts":%d,"node":"%s",' % (node, counters[node], ts, node)
        r = i % 10
        if i % BAD_EVERY == BAD_EVERY - 1:
            line = head + '"event":"tx","kind":"entry","length":999,"airtime_ms":1.0}'
        elif r < 3:
            line = head + ('"event":"tx","kind":"entry","length":120,"airtime_ms":%.1f,'
                           '"dmx":"%014x","pkt":"%016x"}' % (60 + rnd.random() * 20,
                                                             rnd.getrandbits(56),
                                                             rnd.getrandbits(64)))
        elif r < 7:
            line = head + ('"event":"rx","kind":"entry","length":120,"rssi":%.1f,"snr":%.2f,'
                           '"pkt":"%016x"}' % (-80 - rnd.random() * 40, rnd.random() * 10,
                                               rnd.getrandbits(64)))
        elif r == 7:
            line = head + ('"event":"append","feed":"%s","seq":%d,"origin_ts":%d}'
                           % (feeds[i % NODES], 1 + i // NODES, ts - 1000))
        elif r == 8:
            line = head + ('"event":"goset","count":%d,"state":"%064x"}'
                           % (NODES, rnd.getrandbits(256)))
        else:
            line = head + '"event":"want","n":%d}' % (1 + i % 4)
        f = files[(node, (i // NODES) % FILES_PER_NODE)]
        f.write(line)
        f.write("\n")
        total += len(line) + 1
    for f in files.values():
        f.close()
    return total, n


def python_baseline(directory):
    """Single-process parse + validate + dedupe of every line. Returns (seconds, valid)."""
    cat = schema.Catalog()
    seen = set()
    valid = 0
    t0 = time.perf_counter()
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".jsonl"):
            continue
        with open(os.path.join(directory, name), encoding="utf-8", errors="replace") as f:
            for line in f:
                r = schema.validate_line(line.rstrip("\n"), cat)
                if r is None or r[1]:
                    continue
                eid = r[0]["id"]
                if eid not in seen:
                    seen.add(eid)
                    valid += 1
    return time.perf_counter() - t0, valid


def plain_json(spark, src, out):
    """The no-validation reference: the JSON source with the same schema -> partitioned
    Parquet. Returns rows written."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F
    obs = Observation("plain")
    (spark.read.schema(schema.spark_struct(schema.Catalog())).json(src)
     .withColumn("date", F.date_format(F.timestamp_millis("ts"), "yyyy-MM-dd"))
     .observe(obs, F.count(F.lit(1)).alias("rows"))
     .write.partitionBy("date", "node").parquet(out))
    return obs.get["rows"]


def pieces(spark, src):
    """The parts of the two jobs, each read into the noop sink: {name: callable}."""
    from pyspark.sql import functions as F
    cat = schema.Catalog()
    st = schema.spark_struct(cat)

    def noop(df):
        df.write.format("noop").mode("overwrite").save()

    def scan():
        df, cols = ingest.stage_rows(ingest.read_batch(spark, src), cat)
        noop(df.selectExpr(*cols))

    return {
        "plain_parse": lambda: noop(spark.read.schema(st).json(src)),
        "text_parse": lambda: noop(ingest.read_batch(spark, src).select(
            F.from_json("value", st, ingest.JSON_OPTIONS).alias("t"), "source_file")
            .select("t.*", "source_file")),
        "scan": scan,
    }


def dir_bytes(path, suffix):
    total = 0
    for base, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(base, f)) for f in files if f.endswith(suffix))
    return total


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default=DEFAULT_SIZES,
                    help="comma-separated event counts (default %(default)s)")
    ap.add_argument("--master", default="local[2]", help="Spark master (default %(default)s)")
    ap.add_argument("--workdir", help="scratch directory (default: a temporary one)")
    ap.add_argument("--repeat", type=int, default=2,
                    help="runs of each Spark case, alternating; best kept (default 2)")
    ap.add_argument("--warmup", type=int, default=DEFAULT_WARMUP,
                    help="events of the warm-up input both cases run on first "
                         "(default %(default)s)")
    ap.add_argument("--pieces", action="store_true",
                    help="also time the parts of the jobs (noop sink; see above)")
    args = ap.parse_args(argv)
    sizes = [int(float(s)) for s in args.sizes.split(",") if s]
    work = args.workdir or tempfile.mkdtemp(prefix="bench_spark_")
    spark = get_spark(args.master, {"spark.ui.enabled": "false",
                                    "spark.ui.showConsoleProgress": "false",
                                    "spark.driver.memory": "3g",
                                    "spark.sql.shuffle.partitions": "4"}, app="bench-spark")
    spark.sparkContext.setLogLevel("ERROR")
    say = lambda m: print("bench_spark: " + m, file=sys.stderr, flush=True)  # noqa: E731
    try:
        # Warm-up: JVM start, code generation and the JIT's first compilations stay out
        # of the figures (module docstring).
        warm = os.path.join(work, "warm")
        shutil.rmtree(warm, ignore_errors=True)
        generate(os.path.join(warm, "in"), max(1, args.warmup))
        for k in range(WARMUP_RUNS):
            say("warm-up (%d events), run %d of %d" % (args.warmup, k + 1, WARMUP_RUNS))
            for d in ("lake", "plain"):
                shutil.rmtree(os.path.join(warm, d), ignore_errors=True)
            ingest.ingest(spark, os.path.join(warm, "in"), os.path.join(warm, "lake"),
                          mode="batch")
            plain_json(spark, os.path.join(warm, "in"), os.path.join(warm, "plain"))
        shutil.rmtree(warm, ignore_errors=True)
        for n in sizes:
            src = os.path.join(work, "in-%d" % n)
            lake = os.path.join(work, "lake-%d" % n)
            plain = os.path.join(work, "plain-%d" % n)
            shutil.rmtree(src, ignore_errors=True)
            t0 = time.perf_counter()
            jsonl_bytes, lines = generate(src, n)
            gen_s = time.perf_counter() - t0
            say("%d events: python baseline" % n)
            py_s, py_valid = python_baseline(src)
            parts = pieces(spark, src) if args.pieces else {}
            runs = {name: [] for name in ["plain", "ingest"] + list(parts)}   # seconds
            for k in range(args.repeat):
                for name, run in parts.items():
                    say("%d events: %s (noop sink), run %d" % (n, name, k + 1))
                    t0 = time.perf_counter()
                    run()
                    dt = time.perf_counter() - t0
                    runs[name].append(dt)
                say("%d events: plain JSON -> Parquet, run %d" % (n, k + 1))
                shutil.rmtree(plain, ignore_errors=True)
                t0 = time.perf_counter()
                rows = plain_json(spark, src, plain)
                dt = time.perf_counter() - t0
                runs["plain"].append(dt)
                assert rows == lines, (rows, lines)
                say("%d events: validated ingest, run %d" % (n, k + 1))
                shutil.rmtree(lake, ignore_errors=True)
                t0 = time.perf_counter()
                st = ingest.ingest(spark, src, lake, mode="batch")
                dt = time.perf_counter() - t0
                runs["ingest"].append(dt)
                assert st["accepted"] == py_valid, (st, py_valid)
            pq = dir_bytes(os.path.join(lake, "events"), ".parquet")
            best = {k: min(v) for k, v in runs.items()}
            rate = {k: lines / v for k, v in best.items()}
            print(json.dumps({
                "bench": "spark_ingest", "case": "%g events" % n, "events": lines,
                "accepted": st["accepted"], "quarantined": st["quarantined"],
                "generate_s": round(gen_s, 2),
                "python_s": round(py_s, 2), "python_events_per_s": round(lines / py_s),
                "plain_s": round(best["plain"], 2), "plain_events_per_s": round(rate["plain"]),
                "ingest_s": round(best["ingest"], 2),
                "ingest_events_per_s": round(rate["ingest"]),
                "vs_plain": round(rate["ingest"] / rate["plain"], 3),
                "vs_python": round(rate["ingest"] * py_s / lines, 3),
                "plain_runs_s": [round(x, 2) for x in runs["plain"]],
                "ingest_runs_s": [round(x, 2) for x in runs["ingest"]],
                "jsonl_bytes": jsonl_bytes, "parquet_bytes": pq,
                "parquet_over_jsonl": round(pq / float(jsonl_bytes), 4),
                "pieces_events_per_s": {k: round(rate[k]) for k in parts},
                "load_avg": os.getloadavg()[0],
                "master": args.master, "repeat": args.repeat, "warmup": args.warmup}),
                  flush=True)
            for d in (src, lake, plain):
                shutil.rmtree(d, ignore_errors=True)
    finally:
        spark.stop()
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
