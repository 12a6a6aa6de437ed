"""Issue 15, item 8: the home holds the Ed25519 seed and the network key (in tssb.db), so
it is created 0700 and the database 0600; a user who loosened them is warned at open."""
import logging
import os
import stat

import pytest

from tssb.context import Context
from tssb.store import DB_NAME

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_new_home_and_database_are_private(tmp_path):
    old = os.umask(0o022)        # a typical umask: would give 0755 / 0644
    try:
        home = tmp_path / "h"
        ctx = Context.open(str(home))
        ctx.store.add_feed(bytes(32))      # WAL and shared-memory files exist now
        ctx.events.emit("want", n=1)
    finally:
        os.umask(old)
    try:
        assert _mode(home) == 0o700
        for name in (DB_NAME, DB_NAME + "-wal", DB_NAME + "-shm"):
            assert _mode(home / name) == 0o600, name
    finally:
        ctx.close()


def test_loosened_modes_are_warned_about_and_left_alone(tmp_path, caplog):
    home = tmp_path / "h"
    Context.open(str(home)).close()
    os.chmod(home, 0o755)
    os.chmod(home / DB_NAME, 0o644)
    with caplog.at_level(logging.WARNING, logger="tssb.store"):
        Context.open(str(home)).close()
    warned = [r.getMessage() for r in caplog.records if r.name == "tssb.store"]
    assert len(warned) == 2
    assert "0755" in warned[0] and "chmod 700" in warned[0]
    assert "0644" in warned[1] and "chmod 600" in warned[1]
    assert _mode(home) == 0o755 and _mode(home / DB_NAME) == 0o644   # the user's choice
    caplog.clear()
    os.chmod(home, 0o700)
    os.chmod(home / DB_NAME, 0o600)
    with caplog.at_level(logging.WARNING, logger="tssb.store"):
        Context.open(str(home)).close()
    assert not [r for r in caplog.records if r.name == "tssb.store"]
