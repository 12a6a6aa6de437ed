"""The "certs" stream of host sessions: serve certificates and the record stream.

Requests (client -> server), one message each, all integers big-endian:
  "C" FID(32) SEQ u32 ANCHOR u32   certificate of entry SEQ (ANCHOR 0: the server's
                                   default form: compact if available, else bridging)
  "R" FID(32) FROM u32 COUNT u16   records FROM .. FROM+COUNT-1 of the extension stream
                                   (COUNT <= MAX_RECORDS; fewer if the server has fewer)
  "F" FID(32)                      highest certified entry
Replies (server -> client), in request order:
  "c" STATUS u8 BODY               STATUS 0: BODY = certificate; else BODY = reason (UTF-8)
  "r" STATUS u8 N u16 RECORDS      the N records back to back (each one's length follows
                                   from its SEQ: records.record_len)
  "f" STATUS u8 FRONT u32
The server certifies its own feed up to the newest entry before answering about it.
Both ends wait at most PEER_TIMEOUT_S for the other: the server for the next request
(then it ends the stream), the client for each reply (ServiceError "timeout").
"""
import asyncio

from tssb.certs.certlog import CertLog
from tssb.certs.errors import CertError
from tssb.certs.keys import ED25519
from tssb.certs.records import Record, record_len
from tssb.certs.recordstore import SqliteRecords
from tssb.channel import PEER_TIMEOUT_S

MAX_RECORDS = 64         # records per reply: < 64 * 1.2 KB, one channel message
MAX_REQUESTS = 100000    # requests per stream; each costs O(log n) lookups
OK, ERR = 0, 1
FID_LEN = 32


class ServiceError(CertError):
    """The peer answered with an error status (reason = its text) or a malformed reply."""


class Service:
    """Answers certificate requests from one context.

    Args:
        ctx: host context (.store, .identity); records: record backend (default: the
            SQLite table next to ctx.store); scheme: signature scheme.
    """

    def __init__(self, ctx, records=None, scheme=ED25519):
        self.ctx = ctx
        self.records = records if records is not None else SqliteRecords.for_store(ctx.store)
        self.scheme = scheme

    def _log(self, fid):
        log = CertLog(self.records, fid, self.scheme)
        ident = getattr(self.ctx, "identity", None)
        store = self.ctx.store
        if ident is not None and fid == ident.public and store.has_feed(fid):
            if store.front(fid)[0] > log.front():
                log.certify(store, ident.seed)
        return log

    def handle(self, msg):
        """One request -> one reply (bytes). Never raises for bad input."""
        op = msg[:1]
        try:
            if op == b"C" and len(msg) == 1 + FID_LEN + 8:
                fid = msg[1:33]
                seq = int.from_bytes(msg[33:37], "big")
                anchor = int.from_bytes(msg[37:41], "big") or None
                if not self.ctx.store.has_feed(fid):
                    raise CertError("unknown_feed")
                cert = self._log(fid).certificate(self.ctx.store, seq, anchor)
                return b"c" + bytes((OK,)) + cert.encode()
            if op == b"R" and len(msg) == 1 + FID_LEN + 6:
                fid = msg[1:33]
                start = int.from_bytes(msg[33:37], "big")
                count = min(int.from_bytes(msg[37:39], "big"), MAX_RECORDS)
                log = self._log(fid)
                end = min(log.front(), start + count - 1)
                recs = [log.record(s).encode() for s in range(max(start, 1), end + 1)]
                return b"r" + bytes((OK,)) + len(recs).to_bytes(2, "big") + b"".join(recs)
            if op == b"F" and len(msg) == 1 + FID_LEN:
                front = self._log(msg[1:33]).front()
                return b"f" + bytes((OK,)) + front.to_bytes(4, "big")
            raise CertError("bad_request")
        except CertError as e:
            reply = op.lower() if op in (b"C", b"R", b"F") else b"?"
            return reply + bytes((ERR,)) + e.reason.encode()[:200]


async def serve(channel, ctx, peer):
    """Session service entry point (contract 3): answer requests until the peer closes."""
    svc = Service(ctx)
    for _ in range(MAX_REQUESTS):
        try:   # ChannelClosed ends the service; so does a peer silent for PEER_TIMEOUT_S
            msg = await asyncio.wait_for(channel.recv(), PEER_TIMEOUT_S)
            await asyncio.wait_for(channel.send(svc.handle(msg)), PEER_TIMEOUT_S)
        except asyncio.TimeoutError:
            return


class CertClient:
    """Client end of the "certs" stream."""

    def __init__(self, channel, timeout=None):
        self.ch = channel
        self.timeout = PEER_TIMEOUT_S if timeout is None else timeout

    async def _ask(self, req, tag):
        try:
            await asyncio.wait_for(self.ch.send(req), self.timeout)
            rep = await asyncio.wait_for(self.ch.recv(), self.timeout)
        except asyncio.TimeoutError:
            raise ServiceError("timeout")
        if len(rep) < 2 or rep[:1] != tag:
            raise ServiceError("bad_reply")
        if rep[1] != OK:
            raise ServiceError(rep[2:202].decode("utf-8", "replace") or "error")
        return rep[2:]

    async def certificate(self, fid, seq, anchor=0):
        """Returns: the encoded certificate (verify it with certificate.verify)."""
        return await self._ask(b"C" + bytes(fid) + seq.to_bytes(4, "big")
                               + anchor.to_bytes(4, "big"), b"c")

    async def front(self, fid):
        body = await self._ask(b"F" + bytes(fid), b"f")
        if len(body) != 4:
            raise ServiceError("bad_reply")
        return int.from_bytes(body, "big")

    async def records(self, fid, start, count=MAX_RECORDS):
        """Returns: list of Record, consecutive from `start` (may be shorter)."""
        body = await self._ask(b"R" + bytes(fid) + start.to_bytes(4, "big")
                               + min(count, MAX_RECORDS).to_bytes(2, "big"), b"r")
        if len(body) < 2:
            raise ServiceError("bad_reply")
        n = int.from_bytes(body[:2], "big")
        if n > MAX_RECORDS:
            raise ServiceError("bad_reply")
        out, p = [], 2
        for k in range(n):
            size = record_len(start + k)
            out.append(Record.decode(body[p:p + size]))
            p += size
        if p != len(body) or any(r.seq != start + k for k, r in enumerate(out)):
            raise ServiceError("bad_reply")
        return out


async def pull_records(client, log, store, progress=None):
    """Replicate a feed's extension stream: fetch the records after `log.front()` and
    ingest each one against the entries in `store`.

    Returns:
        number of records ingested (stops at the first entry not held locally).
    Raises:
        CertError: a record does not match (bad_record, bad_signature).
    """
    have = log.front()
    remote = await client.front(log.fid)
    local = store.front(log.fid)[0] if store.has_feed(log.fid) else 0
    target = min(remote, local)
    got = 0
    while have < target:
        recs = await client.records(log.fid, have + 1, min(MAX_RECORDS, target - have))
        if not recs:
            break
        for r in recs:
            log.ingest(r, store.entry(log.fid, r.seq))
        have += len(recs)
        got += len(recs)
        if progress:
            progress(have, target)
    return got
