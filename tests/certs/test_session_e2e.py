"""The "certs" stream over a real secure session on loopback."""
import asyncio

from tinyssb import entry
from tssb.certs import CertLog, SqliteRecords, verify
from tssb.certs.service import CertClient, pull_records
from tssb.context import Context
from tssb.session import connect, start_server


def test_fetch_and_replicate_over_session(tmp_path):
    a = Context.open(str(tmp_path / "a"))
    b = Context.open(str(tmp_path / "b"))
    b.set_network_key(a.network_key)
    a.store.add_peer(b.identity.public, "b")
    fid = a.identity.public
    a.store.add_feed(fid)
    b.store.add_feed(fid)
    author = entry.Author(fid, a.identity.sign)
    for i in range(1, 101):
        seq, pkt, mid, _ = author.next(b"post %d" % i, typ=entry.PLAIN48)
        a.store.append(fid, seq, pkt, mid)
        b.store.append(fid, seq, pkt, mid)  # b replicated the entries, not the records
    replica = CertLog(SqliteRecords.for_store(b.store), fid)

    async def main():
        srv = await start_server(a, "127.0.0.1", 0)
        try:
            s = await connect("127.0.0.1", srv.port, b, peer=fid)
            ch = await s.open_stream("certs")
            c = CertClient(ch)
            raw = await c.certificate(fid, 60)  # a certifies its feed on demand
            got = await pull_records(c, replica, b.store)
            await s.close()
            return raw, got
        finally:
            await srv.close()
    raw, got = asyncio.run(asyncio.wait_for(main(), 30))
    v = verify(raw)
    assert (v.seq, v.anchor, v.fid) == (60, 64, fid)
    assert got == 100
    assert replica.certificate(b.store, 60, 64).encode() == raw
    a.close()
    b.close()
