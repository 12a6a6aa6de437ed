"""The firmware's event log: lines in the shared JSONL schema (tinyssb.eventlog).

A board has no wall clock, so "ts" is the node's monotonic ms plus an epoch base the
host can set over the bridge (`set_epoch`); until then the bridge stamps lines. Lines go
to the bridge and to a small ring of recent lines (status queries, tests).
"""
from tinyssb.eventlog import EventLog

RING_LINES = 32  # recent lines kept in RAM (~6 KB at ~200 bytes a line)


class DeviceEvents:
    def __init__(self, node, clock, sink=None, ring=RING_LINES, run=None):
        """Args:
            node: node name; clock: object with now() in ms; sink: function(line) or None.
        """
        self.clock = clock
        self.epoch_ms = 0
        self.sink = sink
        self.ring = []
        self.ring_max = ring
        self.errors = 0
        self.log = EventLog(node, self._write, self._ts, run)

    def _ts(self):
        return self.epoch_ms + self.clock.now()

    def set_epoch(self, epoch_ms_now):
        """Align "ts" so that now is `epoch_ms_now` (Unix ms, from the host)."""
        self.epoch_ms = epoch_ms_now - self.clock.now()

    def _write(self, line):
        self.ring.append(line)
        if len(self.ring) > self.ring_max:
            self.ring.pop(0)
        if self.sink is not None:
            self.sink(line)

    def emit(self, event, **fields):
        """Write one event; a field the schema does not know is counted, not raised
        (a logging mismatch must not stop the radio)."""
        try:
            self.log.emit(event, **fields)
        except ValueError:
            self.errors += 1
