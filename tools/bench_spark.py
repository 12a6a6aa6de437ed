"""Benchmark: Spark ingest throughput vs a single-process Python baseline, Parquet vs JSONL size.

Usage: python tools/bench_spark.py [--sizes 1e6,1e7] [--master local[2]] [--workdir DIR]

For each size N it writes N synthetic events (a tinySSB mesh mix of tx/rx/append/goset/
want/chunk lines, 0.1 % bad lines) as JSONL files, then in the same run:
  - baseline: one Python process reads every line, validates it with the same schema
    rules (tssb_spark.schema.validate_line) and dedupes ids in a set; nothing is written
  - spark: `ingest` in batch mode into a fresh lake (parse, validate, quarantine, dedupe,
    write Parquet partitioned by date and node)
and prints one JSON object per line: events/s of both, "ratio" = spark / baseline events/s,
and the Parquet bytes of the events table against the JSONL bytes.
The default size (10^6) keeps the run near two minutes on 2 cores; the issue's 10^7 case
is `--sizes 1e6,1e7` (about ten times longer).
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
    args = ap.parse_args(argv)
    sizes = [int(float(s)) for s in args.sizes.split(",") if s]
    work = args.workdir or tempfile.mkdtemp(prefix="bench_spark_")
    spark = get_spark(args.master, {"spark.ui.enabled": "false",
                                    "spark.ui.showConsoleProgress": "false",
                                    "spark.driver.memory": "3g",
                                    "spark.sql.shuffle.partitions": "4"}, app="bench-spark")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        # Warm-up on a tiny input so JVM start and code generation are not in the figures.
        warm = os.path.join(work, "warm")
        generate(os.path.join(warm, "in"), 2000)
        ingest.ingest(spark, os.path.join(warm, "in"), os.path.join(warm, "lake"), mode="batch")
        for n in sizes:
            src = os.path.join(work, "in-%d" % n)
            lake = os.path.join(work, "lake-%d" % n)
            shutil.rmtree(src, ignore_errors=True)
            shutil.rmtree(lake, ignore_errors=True)
            t0 = time.perf_counter()
            jsonl_bytes, lines = generate(src, n)
            gen_s = time.perf_counter() - t0
            py_s, py_valid = python_baseline(src)
            t0 = time.perf_counter()
            st = ingest.ingest(spark, src, lake, mode="batch")
            sp_s = time.perf_counter() - t0
            pq = dir_bytes(os.path.join(lake, "events"), ".parquet")
            assert st["accepted"] == py_valid, (st, py_valid)
            print(json.dumps({
                "bench": "spark_ingest", "case": "%g events" % n, "events": lines,
                "accepted": st["accepted"], "quarantined": st["quarantined"],
                "generate_s": round(gen_s, 2),
                "python_s": round(py_s, 2), "python_events_per_s": round(lines / py_s),
                "spark_s": round(sp_s, 2), "spark_events_per_s": round(lines / sp_s),
                "ratio": round((lines / sp_s) / (lines / py_s), 3),
                "jsonl_bytes": jsonl_bytes, "parquet_bytes": pq,
                "parquet_over_jsonl": round(pq / float(jsonl_bytes), 4),
                "master": args.master}), flush=True)
            shutil.rmtree(src, ignore_errors=True)
            shutil.rmtree(lake, ignore_errors=True)
    finally:
        spark.stop()
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
