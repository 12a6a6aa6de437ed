"""Kill a writer process mid-transaction: the store stays intact, nothing committed is lost."""
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap

from tssb.store import Store

WRITER = textwrap.dedent("""
    import sys
    from tssb.store import Store
    s = Store(sys.argv[1])
    fid = bytes(range(32))
    s.add_feed(fid)
    seq = 0
    while True:
        with s.transaction():
            for _ in range(50):
                seq += 1
                s.append(fid, seq, seq.to_bytes(4, "big") * 30, seq.to_bytes(4, "big") * 5)
        print(seq, flush=True)      # committed up to seq
""")


def test_kill_mid_transaction(tmp_path):
    db = str(tmp_path / "crash.db")
    p = subprocess.Popen([sys.executable, "-c", WRITER, db], stdout=subprocess.PIPE, text=True)
    committed = 0
    try:
        for line in p.stdout:
            committed = int(line)
            if committed >= 2000:
                break
    finally:
        os.kill(p.pid, signal.SIGKILL)   # lands mid-way through a later transaction
        p.wait()
    assert committed >= 2000
    raw = sqlite3.connect(db)
    assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    raw.close()
    s = Store(db)
    fid = bytes(range(32))
    n, mid = s.front(fid)
    assert n >= committed and n % 50 == 0       # whole transactions only
    for seq in (1, committed // 2, committed, n):
        assert s.entry(fid, seq) == seq.to_bytes(4, "big") * 30
    assert mid == n.to_bytes(4, "big") * 5
    s.close()
