"""The simulator's one exception type."""


class ScenarioError(ValueError):
    """A scenario (TOML file or dict) that cannot be run; `reason` says why, `where`
    names the offending key (both also in the message)."""

    def __init__(self, reason, where=None):
        ValueError.__init__(self, reason if where is None else "%s: %s" % (where, reason))
        self.reason = reason
        self.where = where
