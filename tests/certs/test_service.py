"""The "certs" session stream over an in-memory channel pair."""
import asyncio
import types

import pytest

from conftest import FAST, Feed
from tssb.channel import memory_pair
from tssb.certs import CertLog, MemRecords, verify
from tssb.certs.service import MAX_RECORDS, CertClient, Service, ServiceError, pull_records


def run_pair(server_ctx, records, client_fn):
    async def main():
        a, b = memory_pair()
        svc = Service(server_ctx, records=records, scheme=FAST)

        async def server():
            try:
                while True:
                    b_msg = await b.recv()
                    await b.send(svc.handle(b_msg))
            except Exception:
                pass
        task = asyncio.create_task(server())
        try:
            return await client_fn(CertClient(a), a)
        finally:
            a.close()
            await asyncio.wait_for(task, 5)
    return asyncio.run(main())


@pytest.fixture
def author():
    feed = Feed(b"\x0b" * 32).grow(150, certify=False)  # the server certifies on demand
    ident = types.SimpleNamespace(public=feed.fid, seed=feed.seed)
    return feed, types.SimpleNamespace(store=feed.store, identity=ident)


def test_fetch_certificates_and_replicate_records(author):
    feed, ctx = author
    replica = CertLog(MemRecords(), feed.fid, FAST)

    async def client(c, ch):
        assert await c.front(feed.fid) == 150
        raw = await c.certificate(feed.fid, 100)          # default: compact, anchor 128
        v = verify(raw, FAST)
        assert (v.seq, v.anchor) == (100, 128)
        raw = await c.certificate(feed.fid, 140, 150)
        assert verify(raw, FAST).anchor == 150
        n = await pull_records(c, replica, feed.store)
        with pytest.raises(ServiceError) as e:
            await c.certificate(feed.fid, 151)
        assert e.value.reason == "no_record"
        with pytest.raises(ServiceError) as e:
            await c.certificate(bytes(32), 1)
        assert e.value.reason == "unknown_feed"
        return n, ch.recv_msgs
    n, msgs = run_pair(ctx, MemRecords(), client)
    assert n == 150 and msgs >= 3 + (150 + MAX_RECORDS - 1) // MAX_RECORDS
    assert replica.certificate(feed.store, 77, 150).encode() == \
        Feed(b"\x0b" * 32).grow(150).cert(77, 150)


def test_bad_requests_get_error_replies(author):
    _, ctx = author
    svc = Service(ctx, records=MemRecords(), scheme=FAST)
    for req in (b"", b"X", b"C" + bytes(10), b"R" + bytes(37), b"F" + bytes(31)):
        rep = svc.handle(req)
        assert rep[1] == 1 and b"bad_request" in rep
