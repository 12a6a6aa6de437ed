"""Network metrics computed from the events table (see docs/spark.md for definitions).

Each function takes the events DataFrame (ingest.read_events) and returns a DataFrame;
`compute` writes them all as Parquet tables under one directory. Only DataFrame
expressions are used (no Python UDFs).
"""
import os

from tssb_spark.session import SESSION_TZ

HOUR_MS = 3600 * 1000
# A tx and an rx of the same packet fingerprint match when the rx is stamped within this
# many ms after the tx start: LoRa airtime of a 255-byte frame at SF12/BW125 is about 10 s,
# plus bridge/log latency. Longer windows only risk matching a later repeat of the packet.
DEFAULT_MATCH_WINDOW_MS = 15000

# sync_done events of the two ends of one host-to-host sync are paired when they are
# this close in time (a sync's two ends log within its duration of each other).
SYNC_PAIR_MS = 60000

TABLES = ("airtime_hourly", "delivery", "replication", "goset_convergence", "sessions",
          "session_stats", "syncs", "drops")


def airtime_hourly(ev):
    """Airtime and duty cycle per node and UTC hour, from `tx` events.

    Returns:
      DataFrame(node, hour (timestamp), tx_count, airtime_ms, duty_cycle, freq_khz):
      duty_cycle is airtime_ms / 3 600 000, the fraction of the hour the node transmitted;
      freq_khz the highest frequency its tx logged that hour (null if none did).
    """
    from pyspark.sql import functions as F
    tx = ev.where(F.col("event") == "tx")
    if "freq_khz" not in ev.columns:   # a lake written by a v1-only ingest
        tx = tx.withColumn("freq_khz", F.lit(None).cast("int"))
    return (tx.groupBy("node", F.date_trunc("hour", F.timestamp_millis("ts")).alias("hour"))
            .agg(F.count(F.lit(1)).alias("tx_count"),
                 F.sum("airtime_ms").alias("airtime_ms"),
                 F.max("freq_khz").alias("freq_khz"))
            .withColumn("duty_cycle", F.col("airtime_ms") / F.lit(float(HOUR_MS)))
            .orderBy("node", "hour"))


def delivery(ev, window_ms=DEFAULT_MATCH_WINDOW_MS):
    """Delivery ratio per directed link (sender -> receiver).

    A `tx` of node A with fingerprint `pkt` counts as delivered to node B when B logged an
    `rx` with the same `pkt` within [tx.ts, tx.ts + window_ms] and, if the rx names its
    `src`, src == A. When several transmissions of the same packet could explain one rx,
    the latest one before it wins. Links: every ordered pair of distinct nodes that logged
    tx or rx; senders count only their tx that carry `pkt`.

    Returns:
      DataFrame(sender, receiver, sent, delivered, ratio, rssi_mean, snr_mean): the signal
      means are over the delivered packets' rx (null when none was delivered).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    w = int(window_ms)
    tx = (ev.where((F.col("event") == "tx") & F.col("pkt").isNotNull())
          .select(F.col("id").alias("tx_id"), F.col("node").alias("sender"), "pkt",
                  F.col("ts").alias("tx_ts"))
          .withColumn("bucket", F.floor(F.col("tx_ts") / F.lit(w))))
    rx = (ev.where((F.col("event") == "rx") & F.col("pkt").isNotNull())
          .select(F.col("id").alias("rx_id"), F.col("node").alias("receiver"), "pkt",
                  F.col("ts").alias("rx_ts"), "src", "rssi", "snr"))
    # Equi-join on (pkt, time bucket) instead of pkt alone: a packet repeated all day
    # (GOSET claims) would otherwise pair every tx with every rx of it.
    rx = rx.withColumn("bucket", F.explode(F.array(
        F.floor(F.col("rx_ts") / F.lit(w)), F.floor(F.col("rx_ts") / F.lit(w)) - 1)))
    cand = (rx.join(tx, ["pkt", "bucket"])
            .where((F.col("receiver") != F.col("sender")) &
                   (F.col("rx_ts") >= F.col("tx_ts")) &
                   (F.col("rx_ts") <= F.col("tx_ts") + F.lit(w)) &
                   (F.col("src").isNull() | (F.col("src") == F.col("sender")))))
    best = (cand.withColumn("rank", F.row_number().over(
        Window.partitionBy("rx_id").orderBy(F.col("tx_ts").desc(), F.col("tx_id").desc())))
        .where(F.col("rank") == 1))
    delivered = (best.groupBy("sender", "receiver")
                 .agg(F.countDistinct("tx_id").alias("delivered"),
                      F.avg("rssi").alias("rssi_mean"), F.avg("snr").alias("snr_mean")))
    sent = tx.groupBy("sender").agg(F.count(F.lit(1)).alias("sent"))
    radios = (ev.where(F.col("event").isin("tx", "rx")).select(F.col("node").alias("receiver"))
              .distinct())
    pairs = sent.crossJoin(radios).where(F.col("sender") != F.col("receiver"))
    return (pairs.join(delivered, ["sender", "receiver"], "left")
            .fillna(0, ["delivered"])
            .withColumn("ratio", F.col("delivered") / F.col("sent"))
            .select("sender", "receiver", "sent", "delivered", "ratio", "rssi_mean",
                    "snr_mean")
            .orderBy("sender", "receiver"))


def replication(ev):
    """Replication latency per entry and node, from `append` events.

    The authoring time of entry (feed, seq) is the smallest `origin_ts` any node logged for
    it, else the time of the author's own append (`own` true). One row per node that stored
    the entry as a replica (own not true): latency_ms = stored_ts - authored_ts (null when
    no authoring time is known). A node's first append of the entry counts.

    Returns:
      DataFrame(feed, seq, node, authored_ts, stored_ts, latency_ms).
    """
    from pyspark.sql import functions as F
    ap = ev.where(F.col("event") == "append")
    per_node = (ap.groupBy("feed", "seq", "node")
                .agg(F.min("ts").alias("stored_ts"),
                     F.max(F.coalesce(F.col("own"), F.lit(False))).alias("own")))
    authored = (ap.groupBy("feed", "seq")
                .agg(F.coalesce(F.min("origin_ts"),
                                F.min(F.when(F.col("own"), F.col("ts")))).alias("authored_ts")))
    return (per_node.where(~F.col("own")).join(authored, ["feed", "seq"])
            .withColumn("latency_ms", F.col("stored_ts") - F.col("authored_ts"))
            .select("feed", "seq", "node", "authored_ts", "stored_ts", "latency_ms")
            .orderBy("feed", "seq", "node"))


def goset_convergence(ev):
    """GOSET convergence per state, from `goset` events.

    Each node holds a state from its `goset` event until its next event with another state.
    For each state S: first_seen_ts is when the first node reported S; S converged when
    every node that ever logged a goset event held S at the same time, at converged_ts (the
    latest time a node reached S), and convergence_ms = converged_ts - first_seen_ts. A
    state superseded somewhere before the last node reached it never converged (nulls).
    A node's first period in S counts (GOSET states only grow, so none returns).

    Returns:
      DataFrame(state, count, first_seen_ts, first_node, nodes_reached, nodes_total,
      converged_ts, convergence_ms).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    g = ev.where(F.col("event") == "goset").select("node", "ts", "id", "state", "count")
    by_node = Window.partitionBy("node").orderBy("ts", "id")
    g = (g.withColumn("prev", F.lag("state").over(by_node))
         .where(F.col("prev").isNull() | (F.col("prev") != F.col("state"))))
    g = g.withColumn("end_ts", F.lead("ts").over(by_node))
    first = (g.groupBy("state", "node")
             .agg(F.min_by(F.struct("ts", "end_ts"), F.col("ts")).alias("p"),
                  F.max("count").alias("count"))
             .select("state", "node", "count", F.col("p.ts").alias("start"),
                     F.col("p.end_ts").alias("end")))
    total = g.select("node").distinct().count()
    per_state = (first.groupBy("state")
                 .agg(F.max("count").alias("count"),
                      F.min("start").alias("first_seen_ts"),
                      F.min_by("node", F.struct("start", "node")).alias("first_node"),
                      F.countDistinct("node").alias("nodes_reached"),
                      F.max("start").alias("last_start"),
                      F.min(F.coalesce(F.col("end"), F.lit(2 ** 62))).alias("first_end")))
    ok = (F.col("nodes_reached") == F.lit(total)) & (F.col("last_start") < F.col("first_end"))
    return (per_state.withColumn("nodes_total", F.lit(total))
            .withColumn("converged_ts", F.when(ok, F.col("last_start")))
            .withColumn("convergence_ms", F.col("converged_ts") - F.col("first_seen_ts"))
            .select("state", "count", "first_seen_ts", "first_node", "nodes_reached",
                    "nodes_total", "converged_ts", "convergence_ms")
            .orderBy("first_seen_ts", "state"))


def sessions(ev):
    """One row per finished host-to-host session (`sync_done`).

    Returns:
      DataFrame(node, peer, proto, mode, ts, ok, reason, rounds, bytes_sent, bytes_recv,
      bytes_total, msgs_sent, msgs_recv, elements_sent, elements_recv, duration_ms).
    """
    from pyspark.sql import functions as F
    s = ev.where(F.col("event") == "sync_done")
    return (s.select("node", "peer", "proto", "mode", "ts", "ok", "reason", "rounds",
                     "bytes_sent", "bytes_recv",
                     (F.col("bytes_sent") + F.col("bytes_recv")).alias("bytes_total"),
                     "msgs_sent", "msgs_recv", "elements_sent", "elements_recv", "duration_ms")
            .orderBy("ts", "node"))


def session_stats(sess):
    """Per protocol and mode: session count, failures, bytes, rounds and duration.

    Args:
      sess: the DataFrame of sessions().
    Returns:
      DataFrame(proto, mode, sessions, ok, failed, bytes_total_mean, bytes_total_max,
      rounds_mean, rounds_max, duration_ms_mean, duration_ms_median, duration_ms_max).
    """
    from pyspark.sql import functions as F
    return (sess.groupBy("proto", "mode")
            .agg(F.count(F.lit(1)).alias("sessions"),
                 F.count_if(F.col("ok")).alias("ok"),
                 F.count_if(~F.col("ok")).alias("failed"),
                 F.avg("bytes_total").alias("bytes_total_mean"),
                 F.max("bytes_total").alias("bytes_total_max"),
                 F.avg("rounds").alias("rounds_mean"),
                 F.max("rounds").alias("rounds_max"),
                 F.avg("duration_ms").alias("duration_ms_mean"),
                 F.median("duration_ms").alias("duration_ms_median"),
                 F.max("duration_ms").alias("duration_ms_max"))
            .orderBy("proto", "mode"))


def syncs(sess, pair_ms=SYNC_PAIR_MS):
    """One row per host-to-host sync, its two ends' `sync_done` events joined.

    Both hosts log the sync; a host's node name is "host-" + the first 12 hex digits of
    its key (tssb.context), so an event's peer names the other end. The events of the two
    ends (same protocol, same pair of hosts, within pair_ms) form one sync, seen from host
    `a` (the lower name): bytes and elements a->b are a's sent, b->a a's received.

    Args:
      sess: the DataFrame of sessions().
    Returns:
      DataFrame(ts, proto, mode, a, b, ends, ok, bytes_ab, bytes_ba, elements_ab,
      elements_ba, rounds, duration_ms, reason).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    other = F.concat(F.lit("host-"), F.substring("peer", 1, 12))
    x = (sess.withColumn("other", other)
         .withColumn("a", F.least("node", "other")).withColumn("b", F.greatest("node", "other"))
         .withColumn("rid", F.monotonically_increasing_id()))
    first = Window.partitionBy("proto", "a", "b").orderBy("ts", "rid")
    # A sync starts at an event with no other-end event pending just before it.
    x = (x.withColumn("prev_node", F.lag("node").over(first))
         .withColumn("prev_ts", F.lag("ts").over(first)))
    start = ~((F.col("prev_node").isNotNull()) & (F.col("prev_node") != F.col("node")) &
              (F.col("ts") - F.col("prev_ts") <= F.lit(pair_ms)))
    x = x.withColumn("new", start.cast("int"))
    x = x.withColumn("sync", F.sum("new").over(first.rowsBetween(Window.unboundedPreceding, 0)))
    # Swap to a's view for rows written by b.
    mine = F.col("node") == F.col("a")
    g = (x.groupBy("proto", "a", "b", "sync")
         .agg(F.min("ts").alias("ts"), F.first("mode", ignorenulls=True).alias("mode"),
              F.count(F.lit(1)).alias("ends"),
              F.min(F.col("ok").cast("int")).alias("ok"),
              F.max(F.when(mine, F.col("bytes_sent")).otherwise(F.col("bytes_recv")))
              .alias("bytes_ab"),
              F.max(F.when(mine, F.col("bytes_recv")).otherwise(F.col("bytes_sent")))
              .alias("bytes_ba"),
              F.max(F.when(mine, F.col("elements_sent")).otherwise(F.col("elements_recv")))
              .alias("elements_ab"),
              F.max(F.when(mine, F.col("elements_recv")).otherwise(F.col("elements_sent")))
              .alias("elements_ba"),
              F.max("rounds").alias("rounds"), F.max("duration_ms").alias("duration_ms"),
              F.first("reason", ignorenulls=True).alias("reason")))
    return (g.withColumn("ok", F.col("ok") == 1)
            .select("ts", "proto", "mode", "a", "b", "ends", "ok", "bytes_ab", "bytes_ba",
                    "elements_ab", "elements_ba", "rounds", "duration_ms", "reason")
            .orderBy("ts", "a"))


def drops_timeline(ev, buckets=30):
    """Dropped packets per reason over time, in about `buckets` equal time bins.

    Returns:
      (DataFrame(bin_ts, reason, drops), bin_ms) or (None, None) without drop events.
    """
    from pyspark.sql import functions as F
    d = ev.where(F.col("event") == "drop")
    span = d.agg(F.min("ts").alias("lo"), F.max("ts").alias("hi")).first()
    if span["lo"] is None:
        return None, None
    bin_ms = max(1000, -(-(span["hi"] - span["lo"] + 1) // buckets))
    t = (F.floor((F.col("ts") - F.lit(span["lo"])) / F.lit(bin_ms)) * F.lit(bin_ms)
         + F.lit(span["lo"]))
    return (d.groupBy(t.alias("bin_ts"), "reason").agg(F.count(F.lit(1)).alias("drops"))
            .orderBy("bin_ts", "reason")), bin_ms


def drops(ev):
    """Returns: DataFrame(node, reason, drops): dropped packets per node and reason."""
    from pyspark.sql import functions as F
    return (ev.where(F.col("event") == "drop").groupBy("node", "reason")
            .agg(F.count(F.lit(1)).alias("drops")).orderBy("node", "reason"))


def compute(spark, events, out_dir, window_ms=DEFAULT_MATCH_WINDOW_MS, progress=None):
    """Compute every metric table and write each as Parquet under out_dir/<name>.

    Args:
      spark: SparkSession.
      events: the events DataFrame.
      out_dir: directory for the tables (each overwritten).
      window_ms: tx/rx match window of the delivery metric.
      progress: optional callable(str).
    Returns:
      dict name -> row count.
    """
    spark.conf.set("spark.sql.session.timeZone", SESSION_TZ)
    say = progress or (lambda s: None)
    events = events.cache()
    try:
        sess = sessions(events)
        tables = {
            "airtime_hourly": airtime_hourly(events),
            "delivery": delivery(events, window_ms),
            "replication": replication(events),
            "goset_convergence": goset_convergence(events),
            "sessions": sess,
            "session_stats": session_stats(sess),
            "syncs": syncs(sess),
            "drops": drops(events),
        }
        counts = {}
        for name in TABLES:
            say("metrics: %s" % name)
            path = os.path.join(out_dir, name)
            tables[name].write.mode("overwrite").parquet(path)
            counts[name] = spark.read.parquet(path).count()
        return counts
    finally:
        events.unpersist()


def read(spark, out_dir, name):
    """Returns: the metric table `name` written by compute()."""
    return spark.read.parquet(os.path.join(out_dir, name))
