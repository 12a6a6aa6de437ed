"""The report: one HTML page with PNG plots (matplotlib, Agg) and the key tables.

`build(input_dir, output_dir)` runs the whole pipeline (ingest -> metrics -> page), so
`make spark` and the demo call one function. Only small aggregated tables are collected
to the driver; plots of per-row data (latencies) use a bounded sample.
"""
import datetime
import html
import json
import os

from tssb_spark import ingest as I
from tssb_spark import metrics as M
from tssb_spark.session import get_spark

# Rows shown per HTML table and points plotted per histogram: the page stays small
# whatever the size of the lake.
TABLE_ROWS = 50
PLOT_SAMPLE = 100000
# Duty-cycle limits drawn on the airtime plot (ETSI EN 300 220 sub-bands: 868.0-868.6 MHz
# 1 %, 869.4-869.65 MHz 10 %; see docs/spark.md).
DUTY_LINES = (0.01, 0.10)
DPI = 100


def build(input_dir, output_dir, spark=None, master=None, lake=None, mode="stream",
          window_ms=M.DEFAULT_MATCH_WINDOW_MS, progress=None):
    """Ingest input_dir, compute the metrics and write output_dir/index.html + PNGs.

    Args:
      input_dir: directory of JSONL event logs.
      output_dir: report directory (created).
      spark: SparkSession to use (default: built with `master`).
      master: Spark master URL when no session is given (None: local default).
      lake: lake directory (default output_dir/lake); re-runs add nothing (idempotent).
      mode: ingest mode, "stream" or "batch".
      window_ms: tx/rx match window of the delivery metric.
      progress: optional callable(str).
    Returns:
      Path of index.html.
    """
    spark = spark or get_spark(master)
    lake = lake or os.path.join(output_dir, "lake")
    say = progress or (lambda s: None)
    stats = I.ingest(spark, input_dir, lake, mode=mode, progress=say)
    say("ingest: %s" % json.dumps(stats, sort_keys=True))
    metrics_dir = os.path.join(lake, "metrics")
    if not os.path.isdir(os.path.join(lake, "events")):
        raise ValueError("no valid events under %s (see the quarantine)" % input_dir)
    M.compute(spark, I.read_events(spark, lake), metrics_dir, window_ms, progress=say)
    return render(spark, lake, output_dir, stats, progress=say)


def _rows(spark, metrics_dir, name, limit=None):
    df = M.read(spark, metrics_dir, name)
    if limit:
        df = df.limit(limit)
    return df.columns, [r.asDict() for r in df.collect()]


def _fmt(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return "%.4g" % v
    return str(v)


def _table(cols, rows, limit=TABLE_ROWS):
    out = ["<table><tr>%s</tr>" % "".join("<th>%s</th>" % html.escape(c) for c in cols)]
    for r in rows[:limit]:
        out.append("<tr>%s</tr>" % "".join("<td>%s</td>" % html.escape(_fmt(r[c]))
                                           for c in cols))
    out.append("</table>")
    if len(rows) > limit:
        out.append("<p>(first %d of %d rows)</p>" % (limit, len(rows)))
    return "\n".join(out)


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_airtime(rows, path):
    """Duty cycle per node and hour, with the regulatory lines. Returns False if no data."""
    if not rows:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4))
    nodes = sorted({r["node"] for r in rows})
    hours = sorted({r["hour"] for r in rows})
    if len(hours) == 1:
        # one hour of data (a short run): a time axis would autoscale to years around
        # a single point, so show one bar per node instead
        duty = {r["node"]: r["duty_cycle"] * 100 for r in rows}
        ax.bar(nodes, [duty[n] for n in nodes])
        ax.set_xlabel("node")
        ax.set_title("Airtime per node, hour %s UTC" % hours[0])
        ax.tick_params(axis="x", labelrotation=90)
    else:
        for node in nodes:
            pts = sorted((r["hour"], r["duty_cycle"] * 100) for r in rows if r["node"] == node)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=node)
        ax.set_xlabel("hour (UTC)")
        ax.set_title("Airtime per node and hour")
        ax.legend(fontsize="small", ncol=2)
        fig.autofmt_xdate()
    for lim in DUTY_LINES:
        ax.axhline(lim * 100, linestyle="--", color="grey", linewidth=0.8)
    ax.set_ylabel("duty cycle (% of hour)")
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return True


def plot_delivery(rows, path):
    """Delivery ratio matrix sender x receiver. Returns False if no data."""
    if not rows:
        return False
    plt = _plt()
    nodes = sorted({r["sender"] for r in rows} | {r["receiver"] for r in rows})
    idx = {n: i for i, n in enumerate(nodes)}
    grid = [[float("nan")] * len(nodes) for _ in nodes]
    for r in rows:
        grid[idx[r["sender"]]][idx[r["receiver"]]] = r["ratio"]
    size = max(4, 0.5 * len(nodes) + 2)
    fig, ax = plt.subplots(figsize=(size, size))
    im = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis")
    ax.set_xticks(range(len(nodes)), nodes, rotation=90)
    ax.set_yticks(range(len(nodes)), nodes)
    ax.set_xlabel("receiver")
    ax.set_ylabel("sender")
    ax.set_title("Delivery ratio per link")
    if len(nodes) <= 12:
        for r in rows:
            ax.text(idx[r["receiver"]], idx[r["sender"]], "%.2f" % r["ratio"],
                    ha="center", va="center", color="w", fontsize=8)
    fig.colorbar(im, ax=ax, fraction=0.046)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return True


def plot_latency(values, path):
    """Histogram of replication latencies (seconds). Returns False if no data."""
    if not values:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.hist([v / 1000.0 for v in values], bins=40)
    ax.set_xlabel("replication latency (s)")
    ax.set_ylabel("entries x nodes")
    ax.set_title("Replication latency (authored at origin -> stored at node)")
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return True


def plot_convergence(rows, path):
    """Convergence time per GOSET state in order of appearance. Returns False if none."""
    pts = [r for r in rows if r["convergence_ms"] is not None]
    if not pts:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar(range(len(pts)), [r["convergence_ms"] / 1000.0 for r in pts])
    ax.set_xticks(range(len(pts)), ["%d feeds" % r["count"] for r in pts], rotation=45)
    ax.set_ylabel("convergence time (s)")
    ax.set_title("GOSET convergence per state")
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return True


def plot_sessions(rows, path):
    """Mean bytes and duration per protocol/mode. Returns False if no data."""
    if not rows:
        return False
    plt = _plt()
    labels = ["%s/%s" % (r["proto"], r["mode"] or "-") for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.bar(labels, [r["bytes_total_mean"] or 0 for r in rows])
    a.set_ylabel("mean bytes per session (sent + received)")
    b.bar(labels, [(r["duration_ms_mean"] or 0) / 1000.0 for r in rows])
    b.set_ylabel("mean duration (s)")
    for ax in (a, b):
        ax.tick_params(axis="x", rotation=45)
    fig.suptitle("Host sessions")
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return True


CSS = ("body{font-family:sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse;"
       "margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;font-size:90%}"
       "th{background:#eee}img{max-width:100%}")


def render(spark, lake, output_dir, stats=None, progress=None):
    """Write output_dir/index.html and its PNGs from a lake with computed metrics.

    Args:
      spark: SparkSession.
      lake: lake directory (events, quarantine, metrics).
      output_dir: report directory.
      stats: counts of the ingest run just made (optional).
      progress: optional callable(str).
    Returns:
      Path of index.html.
    """
    from pyspark.sql import functions as F
    say = progress or (lambda s: None)
    os.makedirs(output_dir, exist_ok=True)
    mdir = os.path.join(lake, "metrics")
    body = ["<h1>tinySSB network report</h1>",
            "<p>Generated %s UTC from lake <code>%s</code>.</p>" % (
                datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
                html.escape(lake))]

    ev = I.read_events(spark, lake)
    per_event = [r.asDict() for r in ev.groupBy("event").count().orderBy("event").collect()]
    body.append("<h2>Events in the lake</h2>")
    body.append(_table(["event", "count"], per_event))
    body.append("<h2>Ingest</h2>")
    if stats:
        keys = ["mode", "lines", "blank", "valid", "accepted", "duplicates", "quarantined",
                "quarantined_new", "batches", "seconds"]
        body.append("<p>This run:</p>" + _table(keys, [stats]))
    q = I.read_quarantine(spark, lake)
    if q is not None:
        qrows = [r.asDict() for r in q.groupBy("reason").count().orderBy(F.desc("count"))
                 .collect()]
        body.append("<p>Quarantine (all runs), by reason:</p>")
        body.append(_table(["reason", "count"], qrows))
    else:
        body.append("<p>Quarantine is empty.</p>")

    sections = [
        ("Airtime and duty cycle", "airtime_hourly", "airtime.png", plot_airtime),
        ("Delivery ratio per link", "delivery", "delivery.png", plot_delivery),
        ("GOSET convergence", "goset_convergence", "convergence.png", plot_convergence),
        ("Host sessions", "session_stats", "sessions.png", plot_sessions),
    ]
    for title, name, png, plot in sections:
        say("report: %s" % name)
        cols, rows = _rows(spark, mdir, name)
        body.append("<h2>%s</h2>" % html.escape(title))
        if plot(rows, os.path.join(output_dir, png)):
            body.append('<img src="%s" alt="%s">' % (png, html.escape(title)))
        body.append(_table(cols, rows) if rows else "<p>No data.</p>")

    say("report: replication")
    rep = M.read(spark, mdir, "replication")
    lat = [r[0] for r in rep.where(F.col("latency_ms").isNotNull()).select("latency_ms")
           .limit(PLOT_SAMPLE).collect()]
    summary = [r.asDict() for r in rep.agg(
        F.count(F.lit(1)).alias("replicas"),
        F.count("latency_ms").alias("with_latency"),
        F.min("latency_ms").alias("min_ms"),
        F.median("latency_ms").alias("median_ms"),
        F.percentile("latency_ms", 0.95).alias("p95_ms"),
        F.max("latency_ms").alias("max_ms")).collect()]
    body.append("<h2>Replication latency</h2>")
    if plot_latency(lat, os.path.join(output_dir, "latency.png")):
        body.append('<img src="latency.png" alt="replication latency">')
    body.append(_table(["replicas", "with_latency", "min_ms", "median_ms", "p95_ms", "max_ms"],
                       summary))
    cols, rows = _rows(spark, mdir, "drops")
    body.append("<h2>Dropped packets</h2>")
    body.append(_table(cols, rows) if rows else "<p>No drops.</p>")

    path = os.path.join(output_dir, "index.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>tinySSB network "
                "report</title><style>%s</style></head><body>\n%s\n</body></html>\n"
                % (CSS, "\n".join(body)))
    return path
