"""Feed store interface and an in-memory implementation.

The core's Node and Replica persist through this interface only; the board's flash store
(firmware/flashstore.py) and the host's SQLite store (host/tssb/store.py) implement the
same methods, so one Node runs on all of them.

A feed is identified by its 32-byte FID. Entries are 120-byte packets numbered from 1 and
appended strictly in order. A side chain of entry `seq` is a list of 120-byte chunks numbered
from 0; chunks arrive in order too (each one's hash is named by its predecessor).

Methods:
  feeds()                      -> list of FIDs (bytes), any order
  add_feed(fid)                   idempotent
  has_feed(fid)                -> bool
  front(fid)                   -> (max_seq, mid): mid is the MID of entry max_seq,
                                  or FID[0:20] when the feed is empty (PREV of seq 1)
  append(fid, seq, pkt, mid)      seq must be max_seq + 1
  entry(fid, seq)              -> 120-byte packet or None
  put_chunk(fid, seq, cnr, c)     cnr must be chunk_count(fid, seq)
  chunk(fid, seq, cnr)         -> 120-byte chunk or None
  chunk_count(fid, seq)        -> number of chunks held for entry seq (0..)
"""


class MemStore:
    def __init__(self):
        self._logs = {}    # fid -> list of packets (index 0 = seq 1)
        self._mids = {}    # fid -> list of MIDs
        self._chunks = {}  # (fid, seq) -> list of chunks

    def feeds(self):
        return list(self._logs.keys())

    def add_feed(self, fid):
        if fid not in self._logs:
            self._logs[fid] = []
            self._mids[fid] = []

    def has_feed(self, fid):
        return fid in self._logs

    def front(self, fid):
        mids = self._mids[fid]
        if not mids:
            return 0, fid[:20]
        return len(mids), mids[-1]

    def append(self, fid, seq, pkt, mid):
        log = self._logs[fid]
        if seq != len(log) + 1:
            raise ValueError("append out of order")
        log.append(bytes(pkt))
        self._mids[fid].append(bytes(mid))

    def entry(self, fid, seq):
        log = self._logs.get(fid)
        if log is None or seq < 1 or seq > len(log):
            return None
        return log[seq - 1]

    def put_chunk(self, fid, seq, cnr, chunk):
        lst = self._chunks.setdefault((fid, seq), [])
        if cnr != len(lst):
            raise ValueError("chunk out of order")
        lst.append(bytes(chunk))

    def chunk(self, fid, seq, cnr):
        lst = self._chunks.get((fid, seq))
        if lst is None or cnr < 0 or cnr >= len(lst):
            return None
        return lst[cnr]

    def chunk_count(self, fid, seq):
        lst = self._chunks.get((fid, seq))
        return 0 if lst is None else len(lst)
