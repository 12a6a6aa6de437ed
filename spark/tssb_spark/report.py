"""The report: one HTML page that answers an operator's questions, with PNG plots
(matplotlib, Agg) and short tables.

  Did the mesh converge, and how fast?   nodes in GOSET agreement over time; per entry,
                                         the share of nodes holding it vs time since written
  Where are the weak links?              delivery ratio per link (matrix), RSSI/SNR
  How much of the legal airtime budget?  busiest hour per node against its region's duty
                                         cycle (from the tx frequency; none for US915/AU915)
  What is being dropped?                 drops by reason over time
  Host syncs                             one row per sync, both ends joined
  Ingest                                 counts, quarantine by reason

`build(input_dir, output_dir)` runs the whole pipeline (ingest -> metrics -> page), so
`make spark` and the demo call one function. Only small aggregated tables reach the
driver; per-row data (GOSET changes, replicas) is capped at PLOT_SAMPLE rows.
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
# Regions by tx frequency (kHz) and their duty-cycle limit (fraction of an hour; None:
# no duty cycle). ETSI EN 300 220: 868.0-868.6 MHz (band M, where tinySSB's EU868 plans
# sit) 1 %, 869.4-869.65 MHz 10 %, 433.05-434.79 MHz 10 %; the rest of 863-870 MHz is
# taken at the strictest, 0.1 %; FCC 15.247 (902-928 MHz) and ACMA (915-928 MHz) set no
# duty cycle (a 400 ms dwell limit instead). firmware/tssbfw/regions.py enforces the plans'
# own limits only (no 10 % sub-band, no 0.1 % rest of 863-870 MHz).
BANDS = (
    (868000, 868600, "EU868", 0.01),
    (869400, 869650, "EU868 g3", 0.10),
    (863000, 870000, "EU863-870", 0.001),
    (433050, 434790, "EU433", 0.10),
    (902000, 928000, "US915/AU915", None),
)
DPI = 100
# Entries drawn as curves in the replication plot (the rest still count in the table).
MAX_CURVES = 60


class NoEvents(ValueError):
    """Neither the input nor the lake holds a valid event (stats: the ingest counts)."""

    def __init__(self, stats):
        ValueError.__init__(self, "no valid events")
        self.stats = stats


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
        raise NoEvents(stats)
    M.compute(spark, I.read_events(spark, lake), metrics_dir, window_ms, progress=say)
    return render(spark, lake, output_dir, stats, progress=say)


# -- formatting: ISO times, short ids, readable units ---------------------------------

def iso(ms):
    """Epoch ms -> '2025-01-01 00:03:12Z' (UTC)."""
    if ms is None:
        return ""
    t = datetime.datetime.fromtimestamp(ms / 1000.0, datetime.timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M:%SZ")


def short(hexid, n=8):
    """A 64-hex id as its first n digits (enough to tell feeds and hosts apart here)."""
    return "" if hexid is None else hexid[:n]


def count(v):
    return "" if v is None else "{:,}".format(int(v))


def nbytes(v):
    if v is None:
        return ""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if v >= size:
            return "%.1f %s" % (v / size, unit)
    return "%d B" % v


def secs(ms):
    if ms is None:
        return ""
    s = ms / 1000.0
    if s >= 3600:
        return "%.1f h" % (s / 3600)
    if s >= 60:
        return "%.1f min" % (s / 60)
    return "%.1f s" % s if s >= 1 else "%d ms" % round(ms)


def pct(x, digits=1):
    return "" if x is None else ("%." + str(digits) + "f %%") % (100.0 * x)


def num(v, fmt="%.1f"):
    return "" if v is None else fmt % v


def region(freq_khz):
    """Returns: (name, duty limit or None) of a tx frequency; ("unknown", None) if none."""
    if freq_khz is None:
        return "unknown", None
    for lo, hi, name, duty in BANDS:
        if lo <= freq_khz <= hi:
            return name, duty
    return "%.1f MHz" % (freq_khz / 1000.0), None


def table(header, rows, limit=TABLE_ROWS):
    """HTML table of already formatted cells."""
    out = ["<table><tr>%s</tr>" % "".join("<th>%s</th>" % html.escape(h) for h in header)]
    for r in rows[:limit]:
        out.append("<tr>%s</tr>" % "".join("<td>%s</td>" % html.escape(str(c)) for c in r))
    out.append("</table>")
    if len(rows) > limit:
        out.append("<p class=note>first %d of %d rows</p>" % (limit, len(rows)))
    return "\n".join(out)


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path):
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    _plt().close(fig)
    return True


# -- the questions ---------------------------------------------------------------------

def agreement_curve(changes):
    """Nodes in agreement over time from GOSET state changes.

    Args:
      changes: [(ts, node, state, count)] sorted by ts.
    Returns:
      (points, total): points [(ts, nodes holding the most common state, its count)].
    """
    held, pts = {}, []
    for ts, node, state, cnt in changes:
        held[node] = (state, cnt)
        tally = {}
        for st in held.values():
            tally[st] = tally.get(st, 0) + 1
        (st, best) = max(tally.items(), key=lambda kv: (kv[1], kv[0][1]))
        pts.append((ts, best, st[1]))
    return pts, len(held)


def plot_agreement(pts, total, t0, path):
    if not pts:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 3.5))
    xs = [(p[0] - t0) / 1000.0 for p in pts]
    ax.step(xs, [p[1] for p in pts], where="post")
    ax.set_ylim(0, total + 0.5)
    ax.set_xlabel("time since the first event (s)")
    ax.set_ylabel("nodes holding the same GOSET")
    ax.set_title("GOSET agreement (%d nodes)" % total)
    ax.grid(alpha=0.3)
    return _save(fig, path)


def share_curves(replicas, holders):
    """Per entry, the share of nodes holding it against time since it was written.

    Args:
      replicas: [(feed, seq, latency_ms)] of replicas with a known authoring time.
      holders: number of nodes that store entries (the author counts as holding at 0).
    Returns:
      {(feed, seq): [(seconds, share)]} as step points.
    """
    by = {}
    for feed, seq, lat in replicas:
        by.setdefault((feed, seq), []).append(max(0, lat))
    out = {}
    for k, lats in by.items():
        lats.sort()
        pts = [(0.0, 1.0 / holders)]
        for i, lat in enumerate(lats):
            pts.append((lat / 1000.0, (i + 2.0) / holders))
        out[k] = pts
    return out


def plot_shares(curves, path):
    if not curves:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 3.5))
    for k in sorted(curves)[:MAX_CURVES]:
        pts = curves[k]
        ax.step([p[0] for p in pts], [100 * p[1] for p in pts], where="post", alpha=0.4,
                linewidth=1)
    ax.set_ylim(0, 105)
    ax.set_xlabel("time since the entry was written (s)")
    ax.set_ylabel("nodes holding it (%)")
    ax.set_title("Replication of %d entries%s" % (
        len(curves), "" if len(curves) <= MAX_CURVES else " (%d drawn)" % MAX_CURVES))
    ax.grid(alpha=0.3)
    return _save(fig, path)


def plot_delivery(rows, path):
    """Delivery ratio matrix sender x receiver. Returns False if no data."""
    if not rows:
        return False
    plt = _plt()
    nodes = sorted({r["sender"] for r in rows} | {r["receiver"] for r in rows})
    idx = {n: i for i, n in enumerate(nodes)}
    grid = [[float("nan")] * len(nodes) for _ in nodes]
    for r in rows:
        grid[idx[r["sender"]]][idx[r["receiver"]]] = 100 * r["ratio"]
    size = max(4, 0.45 * len(nodes) + 2)
    fig, ax = plt.subplots(figsize=(size + 1, size))
    im = ax.imshow(grid, vmin=0, vmax=100, cmap="viridis")
    ax.set_xticks(range(len(nodes)), nodes, rotation=90)
    ax.set_yticks(range(len(nodes)), nodes)
    ax.set_xlabel("receiver")
    ax.set_ylabel("sender")
    ax.set_title("Delivery ratio per link (%)")
    if len(nodes) <= 16:
        for r in rows:
            v = 100 * r["ratio"]
            ax.text(idx[r["receiver"]], idx[r["sender"]], "%.0f" % v, ha="center",
                    va="center", color="w" if v < 60 else "k", fontsize=7)
    fig.colorbar(im, ax=ax, fraction=0.046, label="delivered / sent (%)")
    return _save(fig, path)


def airtime_rows(hourly):
    """Per node: airtime in total, busiest hour, its region and duty-cycle limit."""
    per = {}
    for r in hourly:
        p = per.setdefault(r["node"], {"node": r["node"], "airtime_ms": 0.0, "tx": 0,
                                       "peak": None, "freq_khz": None})
        p["airtime_ms"] += r["airtime_ms"] or 0.0
        p["tx"] += r["tx_count"]
        if p["peak"] is None or r["duty_cycle"] > p["peak"]["duty_cycle"]:
            p["peak"] = r
        p["freq_khz"] = r["freq_khz"] or p["freq_khz"]
    out = []
    for node in sorted(per):
        p = per[node]
        p["region"], p["limit"] = region(p["freq_khz"])
        p["duty"] = p["peak"]["duty_cycle"]
        out.append(p)
    return out


def plot_airtime(rows, path):
    """Busiest-hour duty cycle per node; its region's limit only where one exists."""
    if not rows:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 3.5))
    nodes = [r["node"] for r in rows]
    duty = [100 * r["duty"] for r in rows]
    ax.bar(nodes, duty)
    top = max(duty) * 1.25 or 1.0
    limits = sorted({(r["region"], r["limit"]) for r in rows if r["limit"] is not None},
                    key=lambda x: x[1])
    notes = []
    for name, lim in limits:
        if 100 * lim <= top * 1.6:     # near the data: draw it, and make room for it
            top = max(top, 100 * lim * 1.15)
            ax.axhline(100 * lim, linestyle="--", color="crimson", linewidth=1)
            ax.text(len(nodes) - 0.5, 100 * lim, " %s limit %g %%" % (name, 100 * lim),
                    va="bottom", ha="right", color="crimson", fontsize=8)
        else:
            notes.append("%s limit %g %% far above" % (name, 100 * lim))
    ax.set_ylim(0, top)
    ax.set_xlabel("node")
    ax.set_ylabel("airtime in its busiest hour (% of the hour)")
    regions = sorted({r["region"] for r in rows})
    ax.set_title("Airtime per node (%s%s)" % (", ".join(regions),
                                             "; " + "; ".join(notes) if notes else ""))
    ax.tick_params(axis="x", labelrotation=90)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def plot_drops(rows, bin_ms, t0, path):
    """Drops per reason over time, stacked bars. Returns False if none."""
    if not rows:
        return False
    plt = _plt()
    reasons = sorted({r["reason"] for r in rows})
    bins = sorted({r["bin_ts"] for r in rows})
    fig, ax = plt.subplots(figsize=(8, 3.5))
    base = [0] * len(bins)
    pos = {b: i for i, b in enumerate(bins)}
    xs = [(b - t0) / 1000.0 for b in bins]
    for reason in reasons:
        ys = [0] * len(bins)
        for r in rows:
            if r["reason"] == reason:
                ys[pos[r["bin_ts"]]] = r["drops"]
        ax.bar(xs, ys, bottom=base, width=bin_ms / 1000.0 * 0.9, align="edge", label=reason)
        base = [a + b for a, b in zip(base, ys)]
    ax.set_xlabel("time since the first event (s)")
    ax.set_ylabel("packets dropped per %s" % secs(bin_ms))
    ax.set_title("Dropped packets by reason")
    ax.legend(fontsize="small")
    return _save(fig, path)


CSS = ("body{font-family:sans-serif;margin:1.5em auto;max-width:62em;padding:0 1em;"
       "color:#222}h2{border-bottom:1px solid #ccc;margin-top:1.6em}"
       "table{border-collapse:collapse;margin:.4em 0}td,th{border:1px solid #ccc;"
       "padding:.15em .5em;font-size:88%;text-align:right}th{background:#eee}"
       "td:first-child,th:first-child{text-align:left}img{max-width:100%}"
       ".answer{font-size:105%;background:#f4f7fb;padding:.4em .7em;border-left:3px solid "
       "#4a7ab5}.note{color:#666;font-size:85%}")


def _collect(df, limit=None):
    if limit:
        df = df.limit(limit)
    return [r.asDict() for r in df.collect()]


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
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    say = progress or (lambda s: None)
    os.makedirs(output_dir, exist_ok=True)
    mdir = os.path.join(lake, "metrics")
    out = lambda name: os.path.join(output_dir, name)  # noqa: E731
    ev = I.read_events(spark, lake)
    head = ev.agg(F.min("ts").alias("t0"), F.max("ts").alias("t1"), F.count(F.lit(1)).alias("n"),
                  F.countDistinct("node").alias("nodes")).first()
    t0 = head["t0"]
    body = ["<h1>tinySSB network report</h1>",
            "<p>%s events from %d nodes, %s to %s (%s). Generated %s from lake <code>%s</code>."
            "</p>" % (count(head["n"]), head["nodes"], iso(head["t0"]), iso(head["t1"]),
                      secs(head["t1"] - head["t0"]),
                      iso(int(datetime.datetime.now(datetime.timezone.utc).timestamp() * 1000)),
                      html.escape(lake))]

    say("report: convergence")
    body.append("<h2>Did the mesh converge, and how fast?</h2>")
    g = ev.where(F.col("event") == "goset").select("ts", "node", "id", "state", "count")
    w = Window.partitionBy("node").orderBy("ts", "id")
    changes = [(r["ts"], r["node"], r["state"], r["count"]) for r in _collect(
        g.withColumn("prev", F.lag("state").over(w))
        .where(F.col("prev").isNull() | (F.col("prev") != F.col("state")))
        .orderBy("ts", "id"), PLOT_SAMPLE)]
    pts, total = agreement_curve(changes)
    if pts:
        final = [p for p in pts if p[1] == total]
        if final:
            last_change = pts[-1][0]
            body.append("<p class=answer>Yes: all %d nodes that logged a GOSET held the same "
                        "one (%d feed%s) "
                        "from %s, %s after the first event%s.</p>" % (
                            total, final[0][2], "" if final[0][2] == 1 else "s",
                            iso(final[0][0]), secs(final[0][0] - t0),
                            "" if last_change <= final[0][0] else
                            "; the last change was at %s" % iso(last_change)))
        else:
            body.append("<p class=answer>No: at most %d of %d nodes held the same GOSET.</p>"
                        % (max(p[1] for p in pts), total))
        if plot_agreement(pts, total, t0, out("agreement.png")):
            body.append('<img src="agreement.png" alt="GOSET agreement over time">')
    else:
        body.append("<p>No GOSET events.</p>")
    rep = M.read(spark, mdir, "replication")
    holders = ev.where(F.col("event") == "append").select("node").distinct().count()
    replicas = [(r["feed"], r["seq"], r["latency_ms"]) for r in _collect(
        rep.where(F.col("latency_ms").isNotNull()).select("feed", "seq", "latency_ms"),
        PLOT_SAMPLE)]
    curves = share_curves(replicas, max(holders, 1))
    if plot_shares(curves, out("replication.png")):
        body.append('<img src="replication.png" alt="replication per entry">')
    entries = _collect(rep.groupBy("feed", "seq").agg(
        F.min("authored_ts").alias("authored"), F.count(F.lit(1)).alias("replicas"),
        F.median("latency_ms").alias("median"), F.max("latency_ms").alias("last"))
        .orderBy("authored", "feed", "seq"), 1000)
    if entries:
        body.append(table(["feed", "seq", "written", "nodes holding it",
                           "median time to a node", "time to the last node"],
                          [(short(r["feed"]), r["seq"], iso(r["authored"]),
                            "%d of %d" % (r["replicas"] + 1, holders), secs(r["median"]),
                            secs(r["last"])) for r in entries], limit=20))

    say("report: links")
    body.append("<h2>Where are the weak links?</h2>")
    links = _collect(M.read(spark, mdir, "delivery"))
    if plot_delivery(links, out("delivery.png")):
        heard = [r for r in links if r["delivered"]]
        weak = sorted(heard, key=lambda r: (r["ratio"], r["sender"], r["receiver"]))
        if weak:
            body.append("<p class=answer>%d of %d directed links carried frames; on those, "
                        "%s of the frames sent reached the receiver. Weakest: %s → %s, %s."
                        "</p>" % (len(heard), len(links), pct(
                            sum(r["delivered"] for r in heard) /
                            float(sum(r["sent"] for r in heard))), weak[0]["sender"],
                            weak[0]["receiver"], pct(weak[0]["ratio"])))
        body.append('<img src="delivery.png" alt="delivery ratio per link">')
        body.append("<p>Weakest links that carried anything:</p>")
        body.append(table(["sender", "receiver", "sent", "delivered", "ratio",
                           "mean RSSI (dBm)", "mean SNR (dB)"],
                          [(r["sender"], r["receiver"], count(r["sent"]), count(r["delivered"]),
                            pct(r["ratio"]), num(r["rssi_mean"]), num(r["snr_mean"]))
                           for r in weak], limit=15))
    else:
        body.append("<p>No data: no tx/rx events with a packet id (<code>pkt</code>).</p>")

    say("report: airtime")
    body.append("<h2>How much of the legal airtime budget did each node use?</h2>")
    air = airtime_rows(_collect(M.read(spark, mdir, "airtime_hourly")))
    if plot_airtime(air, out("airtime.png")):
        worst = max(air, key=lambda r: r["duty"] / r["limit"] if r["limit"] else 0)
        if worst["limit"]:
            body.append("<p class=answer>Busiest node %s used %s of its %s budget (%s of an "
                        "hour, limit %g %%).</p>" % (worst["node"],
                                                     pct(worst["duty"] / worst["limit"], 0),
                                                     worst["region"], pct(worst["duty"], 2),
                                                     100 * worst["limit"]))
        else:
            regions = sorted({r["region"] for r in air})
            body.append("<p class=answer>%s; the busiest hour of any node used %s of the "
                        "hour.</p>" % (
                            "The tx events name no frequency, so the region's limit is "
                            "unknown" if regions == ["unknown"] else
                            "No node's region plan has a duty-cycle limit (%s)"
                            % ", ".join(regions), pct(max(r["duty"] for r in air), 2)))
        body.append('<img src="airtime.png" alt="airtime per node">')
        body.append(table(["node", "region", "frames sent", "airtime", "busiest hour (UTC)",
                           "its airtime", "share of hour", "share of budget"],
                          [(r["node"], r["region"], count(r["tx"]), secs(r["airtime_ms"]),
                            iso(int(r["peak"]["hour"].replace(
                                tzinfo=datetime.timezone.utc).timestamp() * 1000))[:-4] + "Z",
                            secs(r["peak"]["airtime_ms"]), pct(r["duty"], 2),
                            pct(r["duty"] / r["limit"], 0) if r["limit"] else "no limit")
                           for r in air]))
    else:
        body.append("<p>No data: no tx events.</p>")

    say("report: drops")
    body.append("<h2>What is being dropped?</h2>")
    timeline, bin_ms = M.drops_timeline(ev)
    if timeline is not None:
        trows = _collect(timeline)
        plot_drops(trows, bin_ms, t0, out("drops.png"))
        body.append('<img src="drops.png" alt="drops by reason over time">')
        body.append(table(["node", "reason", "dropped"],
                          [(r["node"], r["reason"], count(r["drops"]))
                           for r in _collect(M.read(spark, mdir, "drops")
                                             .orderBy(F.desc("drops"), "node"))], limit=20))
    else:
        body.append("<p>No packets were dropped.</p>")

    say("report: syncs")
    body.append("<h2>Host syncs</h2>")
    sy = _collect(M.read(spark, mdir, "syncs"), 1000)
    if sy:
        body.append(table(["time", "protocol", "mode", "host a", "host b", "ok", "bytes a→b",
                           "bytes b→a", "elements a→b", "elements b→a", "rounds", "duration",
                           "ends logged"],
                          [(iso(r["ts"]), r["proto"], r["mode"] or "", r["a"], r["b"],
                            "yes" if r["ok"] else "no: " + (r["reason"] or "?"),
                            nbytes(r["bytes_ab"]), nbytes(r["bytes_ba"]),
                            count(r["elements_ab"]), count(r["elements_ba"]),
                            count(r["rounds"]), secs(r["duration_ms"]), r["ends"])
                           for r in sy]))
    else:
        body.append("<p>No host-to-host syncs.</p>")

    body.append("<h2>Ingest</h2>")
    per_event = _collect(ev.groupBy("event").count().orderBy("event"))
    body.append(table(["event", "count"], [(r["event"], count(r["count"])) for r in per_event]))
    if stats:
        body.append("<p>This run: %s lines, %s valid, %s new, %s duplicates, %s quarantined "
                    "(%s new), %s.</p>" % (count(stats["lines"]), count(stats["valid"]),
                                           count(stats["accepted"]), count(stats["duplicates"]),
                                           count(stats["quarantined"]),
                                           count(stats["quarantined_new"]),
                                           secs(1000 * stats.get("seconds", 0))))
    q = I.read_quarantine(spark, lake)
    if q is not None:
        body.append("<p>Quarantine (all runs), by reason; "
                    "<code>tssb-spark quarantine --lake %s</code> shows the lines:</p>"
                    % html.escape(lake))
        body.append(table(["reason", "lines"], [(r["reason"], count(r["count"])) for r in
                                                _collect(q.groupBy("reason").count()
                                                         .orderBy(F.desc("count")))]))
    else:
        body.append("<p>Quarantine is empty.</p>")

    path = out("index.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>tinySSB network "
                "report</title><style>%s</style></head><body>\n%s\n</body></html>\n"
                % (CSS, "\n".join(body)))
    return path
