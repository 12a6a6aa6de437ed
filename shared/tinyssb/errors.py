"""The one exception of the protocol core.

Every decoder validates lengths and ranges and raises WireError with a short reason
(a stable string tests and logs can read). Node catches it, drops the packet and
counts the reason; it never lets it escape.
"""


class WireError(ValueError):
    def __init__(self, reason, detail=None):
        super().__init__(reason if detail is None else reason + ": " + str(detail))
        self.reason = reason
