"""The one exception of the Bloom-clock protocols.

Every decoder and every protocol step raises ClockError with a short, stable reason
string (tests and the event log read `.reason`); the drivers turn it into a failed
`sync_done` and close the channel.
"""


class ClockError(ValueError):
    def __init__(self, reason, detail=None):
        ValueError.__init__(self, reason if detail is None else "%s: %s" % (reason, detail))
        self.reason = reason
        self.detail = detail


class CounterError(ClockError):
    """An elapsed-time increment (or initiate/participate message) broke a rule of the
    spec; the author is blocked. `reason` names the rule."""
