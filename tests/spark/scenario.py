"""Fixture generator: small hand-computable scenarios written through the real EventLog.

Times are offsets in ms from T0 (the virtual epoch), so expected values in the tests are
plain arithmetic on the numbers given to emit().
"""
import json
import os

from tinyssb import eventlog

T0 = eventlog.VIRTUAL_EPOCH_MS  # 2025-01-01T00:00:00Z


def hexid(c, n=64):
    """A fake hex id made of one repeated hex digit (readable in assertions)."""
    return c * n


class Scenario:
    """Collects events per node; write(dir) stores one JSONL file per node."""

    def __init__(self):
        self.now = T0
        self.lines = {}
        self.logs = {}

    def emit(self, node, at_ms, event, **fields):
        """Emit `event` at node with ts = T0 + at_ms. Returns the event id."""
        log = self.logs.get(node)
        if log is None:
            self.lines[node] = []
            log = eventlog.EventLog(node, self.lines[node].append, lambda: self.now, run="r1")
            self.logs[node] = log
        self.now = T0 + at_ms
        return log.emit(event, **fields)

    def all_lines(self):
        return [line for node in sorted(self.lines) for line in self.lines[node]]

    def write(self, directory, extra=None):
        """Write <node>.jsonl files (plus `extra`: name -> list of raw lines)."""
        os.makedirs(directory, exist_ok=True)
        for node, lines in self.lines.items():
            with open(os.path.join(directory, node + ".jsonl"), "w") as f:
                f.write("\n".join(lines) + "\n")
        for name, lines in (extra or {}).items():
            with open(os.path.join(directory, name), "w") as f:
                f.write("\n".join(lines) + "\n")
        return directory


def line(**rec):
    """A raw JSON line from keyword fields (for hand-made bad lines)."""
    return json.dumps(rec)


def events_df(spark, lines):
    """Run raw lines through the real validation and return the valid typed rows."""
    from pyspark.sql import functions as F
    from tssb_spark import ingest, schema
    df = spark.createDataFrame([(l, "mem") for l in lines], "value string, source_file string")
    c = ingest.classify(df, schema.Catalog())
    bad = c.where(F.col("_reason").isNotNull()).select("value", "_reasons").collect()
    assert not bad, bad
    return c.where(~F.col("blank")).select(*schema.Catalog().columns)
