"""The exceptions of the secure-session stack (handshake, box stream, multiplexer)."""


class ProtocolError(Exception):
    """The peer broke the protocol, or could not be authenticated.

    `reason` is a short stable string (tests and logs read it); after this error the
    connection is closed without telling the peer why.
    """

    def __init__(self, reason, detail=None):
        Exception.__init__(self, reason if detail is None else "%s: %s" % (reason, detail))
        self.reason = reason


class StreamRefused(Exception):
    """The remote side refused to open a named stream; `reason` says why (sent by the peer)."""

    def __init__(self, name, reason):
        Exception.__init__(self, "stream %r refused: %s" % (name, reason))
        self.name = name
        self.reason = reason


class SessionRefused(ProtocolError):
    """The peer ended (or would not start) the session and said why: `text` (e.g.
    "server busy: too many sessions", "cut off: budget: unverified")."""

    def __init__(self, text):
        ProtocolError.__init__(self, "session refused", text)
        self.text = text
