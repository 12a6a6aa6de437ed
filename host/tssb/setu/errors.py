"""The one exception of the SETU protocol.

Every decoder and every state-machine check raises `SetuError` with a stable `reason`
string (tests and logs match on it) and an optional human-readable detail. After it, the
`Reconciler` is in the ERROR state and refuses further input.
"""


class SetuError(Exception):
    """A peer broke the protocol (or a local limit was hit); `reason` is a stable tag."""

    def __init__(self, reason, detail=None):
        Exception.__init__(self, reason if detail is None else "%s: %s" % (reason, detail))
        self.reason = reason
        self.detail = detail
