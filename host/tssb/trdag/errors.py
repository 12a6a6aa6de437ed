"""The one exception of the trDAG protocol.

Every check that fails (a malformed frame, an inconsistent aggregate, a message that does
not validate or was not announced) raises TrdagError with a short, stable reason string
that tests, logs and the ABORT frame carry as data.
"""


class TrdagError(Exception):
    """A trDAG failure. `reason` is a stable token (e.g. "inconsistent_aggregate")."""

    def __init__(self, reason, detail=None):
        Exception.__init__(self, reason if detail is None else "%s: %s" % (reason, detail))
        self.reason = reason
        self.detail = detail
