"""The one exception of the certificate protocol."""


class CertError(ValueError):
    """A certificate, record, fork proof or request is malformed or does not verify.

    `reason` is a stable short string (tests and logs read it); `detail` is free text.
    """

    def __init__(self, reason, detail=None):
        ValueError.__init__(self, reason if detail is None else "%s: %s" % (reason, detail))
        self.reason = reason
        self.detail = detail
