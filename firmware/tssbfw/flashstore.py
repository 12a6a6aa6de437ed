"""Crash-safe feed store over files (the interface of tinyssb.store), for flash VFS.

Layout under `root`, one directory per feed named by the FID in hex:
  <fid>/log     entry records, fixed size, record i holds seq i+1:
                SEQ (4, BE) | PKT (120) | MID (20) | CRC32 (4, BE, over the 144 before)
  <fid>/chain   side-chain chunk records, in arrival order:
                SEQ (4) | CNR (4) | CHUNK (120) | CRC32 (4, over the 128 before)

Writes only ever append whole records (open 'ab', write, close), so a power cut can only
damage the tail. `open()` scans every file: a record counts when its CRC matches and it
continues its sequence (seq = previous + 1; cnr = chunks held for that seq); the first
record that does not is where the file is cut back to. Cutting back copies the good
prefix to `<name>.tmp`, removes the original and renames the copy; a cut during that
is repaired on the next open (a lone .tmp is the finished copy, a .tmp next to its
original is an unfinished one). Only `os` and `open` are used, so this runs on
MicroPython's VFS (LittleFS, FAT) as well as on CPython.

Capacity: `capacity` bytes of records in all and at most `max_feeds` feeds. An append
that does not fit raises `StoreFull`, stores nothing, and emits one `store_full` {feed}
event per feed (not per attempt); what is stored stays readable.
"""
import os
from binascii import hexlify, unhexlify

from tinyssb.hotloops import crc32

PKT_LEN = 120          # tinySSB log entry / chunk length (tinyssb-wire.md 2)
MID_LEN = 20           # message id length (tinyssb-wire.md 2)
FID_LEN = 32
ENTRY_REC = 4 + PKT_LEN + MID_LEN + 4    # 148
CHUNK_REC = 4 + 4 + PKT_LEN + 4          # 132
MAX_FEEDS = 100        # GOset key limit of deployed nodes (LIB/const.h:14)
DEFAULT_CAPACITY = 1 << 20  # bytes of records; a 4 MB ESP32 board has ~2 MB of VFS
MAX_SEQ = 0xFFFFFFFF   # SEQ is a 32-bit field on the wire


class StoreFull(ValueError):
    """The store's capacity policy refused a write (reason: 'bytes' or 'feeds')."""

    def __init__(self, reason, fid=None):
        ValueError.__init__(self, "store full: " + reason)
        self.reason = reason
        self.fid = fid


def _exists(path):
    try:
        os.stat(path)
        return True
    except OSError:
        return False


def _size(path):
    try:
        return os.stat(path)[6]
    except OSError:
        return 0


class FlashStore:
    def __init__(self, root, capacity=DEFAULT_CAPACITY, max_feeds=MAX_FEEDS, events=None):
        """Open (and recover) the store under `root`, creating it when missing.

        Args:
            root: directory path; capacity: bytes of records allowed in all;
            max_feeds: feeds allowed; events: object with emit(event, **fields) or None.
        """
        self.root = root.rstrip("/") or "/"
        self.capacity = capacity
        self.max_feeds = max_feeds
        self.events = events
        self.used = 0
        self.bytes_written = 0     # record bytes appended since open (for figures)
        self.recovered = {}        # path -> bytes cut off at open
        self.read_errors = 0       # records whose CRC failed when read back
        self._front = {}           # fid -> [count, last mid]
        self._chunks = {}          # fid -> {seq: list of record offsets}
        self._chain_len = {}       # fid -> bytes in its chain file
        self._full_reported = set()
        self._buf = bytearray(ENTRY_REC)
        if not _exists(self.root):
            _mkdirs(self.root)
        for name in sorted(os.listdir(self.root)):
            if len(name) != 2 * FID_LEN:
                continue
            try:
                fid = unhexlify(name)
            except ValueError:
                continue
            self._load(fid)

    # -- paths -------------------------------------------------------------------------
    def _dir(self, fid):
        return self.root + "/" + hexlify(fid).decode()

    # -- recovery ----------------------------------------------------------------------
    def _load(self, fid):
        d = self._dir(fid)
        log = d + "/log"
        chain = d + "/chain"
        _settle_tmp(log)
        _settle_tmp(chain)
        count, mid, good = 0, fid[:20], 0
        if _exists(log):
            with open(log, "rb") as f:
                buf = self._buf
                mv = memoryview(buf)
                while f.readinto(buf) == ENTRY_REC:
                    if not _rec_ok(mv, ENTRY_REC):
                        break
                    if int.from_bytes(buf[0:4], "big") != count + 1:
                        break
                    count += 1
                    mid = bytes(buf[4 + PKT_LEN:4 + PKT_LEN + MID_LEN])
                good = count * ENTRY_REC
            self._cut(log, good)
        self._front[fid] = [count, mid]
        index = {}
        cgood = 0
        if _exists(chain):
            with open(chain, "rb") as f:
                buf = bytearray(CHUNK_REC)
                mv = memoryview(buf)
                while f.readinto(buf) == CHUNK_REC:
                    if not _rec_ok(mv, CHUNK_REC):
                        break
                    seq = int.from_bytes(buf[0:4], "big")
                    cnr = int.from_bytes(buf[4:8], "big")
                    lst = index.get(seq)
                    if cnr != (0 if lst is None else len(lst)):
                        break
                    if lst is None:
                        lst = index[seq] = []
                    lst.append(cgood)
                    cgood += CHUNK_REC
            self._cut(chain, cgood)
        self._chunks[fid] = index
        self._chain_len[fid] = cgood
        self.used += good + cgood

    def _cut(self, path, good):
        size = _size(path)
        if size == good:
            return
        tmp = path + ".tmp"
        with open(path, "rb") as src, open(tmp, "wb") as dst:
            left = good
            buf = bytearray(512)
            while left > 0:
                n = src.readinto(buf)
                if not n:
                    break
                n = min(n, left)
                dst.write(memoryview(buf)[:n])
                left -= n
        os.remove(path)
        os.rename(tmp, path)
        self.recovered[path] = size - good

    # -- capacity ----------------------------------------------------------------------
    def _reserve(self, fid, nbytes):
        if self.used + nbytes > self.capacity:
            self._report_full(fid, "bytes")
            raise StoreFull("bytes", fid)

    def _report_full(self, fid, reason):
        if fid in self._full_reported:
            return
        self._full_reported.add(fid)
        if self.events is not None:
            self.events.emit("store_full", feed=hexlify(fid).decode(), reason=reason,
                             used=self.used, capacity=self.capacity)

    def _append(self, path, rec):
        with open(path, "ab") as f:
            f.write(rec)
        self.used += len(rec)
        self.bytes_written += len(rec)

    # -- the store interface -----------------------------------------------------------
    def feeds(self):
        return list(self._front.keys())

    def has_feed(self, fid):
        return fid in self._front

    def add_feed(self, fid):
        """Create a feed (idempotent).

        Raises:
            ValueError: FID not 32 bytes. StoreFull: already max_feeds feeds.
        """
        fid = bytes(fid)
        if len(fid) != FID_LEN:
            raise ValueError("fid must be 32 bytes")
        if fid in self._front:
            return
        if len(self._front) >= self.max_feeds:
            self._report_full(fid, "feeds")
            raise StoreFull("feeds", fid)
        d = self._dir(fid)
        if not _exists(d):
            os.mkdir(d)
        self._front[fid] = [0, fid[:20]]
        self._chunks[fid] = {}
        self._chain_len[fid] = 0

    def front(self, fid):
        c = self._front[fid]
        return c[0], c[1]

    def append(self, fid, seq, pkt, mid):
        """Append entry `seq` (must be max_seq + 1) with its MID.

        Raises:
            KeyError: unknown feed. ValueError: out of order or bad lengths.
            StoreFull: capacity reached (nothing is written).
        """
        fr = self._front[fid]
        if seq != fr[0] + 1 or seq > MAX_SEQ:
            raise ValueError("append out of order")
        if len(pkt) != PKT_LEN or len(mid) != MID_LEN:
            raise ValueError("bad entry or mid length")
        self._reserve(fid, ENTRY_REC)
        rec = bytearray(ENTRY_REC)
        rec[0:4] = seq.to_bytes(4, "big")
        rec[4:4 + PKT_LEN] = pkt
        rec[4 + PKT_LEN:ENTRY_REC - 4] = mid
        rec[ENTRY_REC - 4:] = crc32(memoryview(rec)[:ENTRY_REC - 4]).to_bytes(4, "big")
        self._append(self._dir(fid) + "/log", rec)
        fr[0] = seq
        fr[1] = bytes(mid)

    def entry(self, fid, seq):
        fr = self._front.get(fid)
        if fr is None or seq < 1 or seq > fr[0]:
            return None
        with open(self._dir(fid) + "/log", "rb") as f:
            f.seek((seq - 1) * ENTRY_REC)
            buf = bytearray(ENTRY_REC)
            if f.readinto(buf) != ENTRY_REC or not _rec_ok(memoryview(buf), ENTRY_REC):
                self.read_errors += 1
                return None
        return bytes(buf[4:4 + PKT_LEN])

    def put_chunk(self, fid, seq, cnr, chunk):
        """Store chunk `cnr` (must be chunk_count) of entry seq's side chain.

        Raises:
            KeyError: unknown feed. ValueError: out of order or bad length. StoreFull.
        """
        index = self._chunks[fid]
        lst = index.get(seq)
        if cnr != (0 if lst is None else len(lst)) or not 1 <= seq <= MAX_SEQ:
            raise ValueError("chunk out of order")
        if len(chunk) != PKT_LEN:
            raise ValueError("bad chunk length")
        self._reserve(fid, CHUNK_REC)
        rec = bytearray(CHUNK_REC)
        rec[0:4] = seq.to_bytes(4, "big")
        rec[4:8] = cnr.to_bytes(4, "big")
        rec[8:8 + PKT_LEN] = chunk
        rec[CHUNK_REC - 4:] = crc32(memoryview(rec)[:CHUNK_REC - 4]).to_bytes(4, "big")
        off = self._chain_len[fid]
        self._append(self._dir(fid) + "/chain", rec)
        self._chain_len[fid] = off + CHUNK_REC
        if lst is None:
            lst = index[seq] = []
        lst.append(off)

    def chunk(self, fid, seq, cnr):
        lst = self._chunks.get(fid, {}).get(seq)
        if lst is None or cnr < 0 or cnr >= len(lst):
            return None
        with open(self._dir(fid) + "/chain", "rb") as f:
            f.seek(lst[cnr])
            buf = bytearray(CHUNK_REC)
            if f.readinto(buf) != CHUNK_REC or not _rec_ok(memoryview(buf), CHUNK_REC):
                self.read_errors += 1
                return None
        return bytes(buf[8:8 + PKT_LEN])

    def chunk_count(self, fid, seq):
        lst = self._chunks.get(fid, {}).get(seq)
        return 0 if lst is None else len(lst)


def _rec_ok(mv, n):
    return crc32(mv[:n - 4]) == int.from_bytes(bytes(mv[n - 4:n]), "big")


def _settle_tmp(path):
    """Finish or undo an interrupted cut-back (see module docstring)."""
    tmp = path + ".tmp"
    if not _exists(tmp):
        return
    if _exists(path):
        os.remove(tmp)       # copy was unfinished; the original is intact
    else:
        os.rename(tmp, path)  # copy was complete; the original was already removed


def _mkdirs(path):
    cur = ""
    for part in path.split("/"):
        if not part:
            cur = "/" if not cur else cur
            continue
        cur = part if cur == "" else (cur.rstrip("/") + "/" + part)
        if not _exists(cur):
            os.mkdir(cur)
