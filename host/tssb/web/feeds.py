"""The feeds view's data: each feed's front, display name, progress and forks (the seqs
where two signed entries are known: tssb.feedforks), and pages of its decoded posts
(tssb.posts: the same decoding as `tssb read`, side chains reassembled, boxes addressed to
us opened; the others only counted).

`FeedIndex.refresh()` compares the store with what it last saw and returns the feeds
that changed, so the server pushes only those. Names come from a feed's latest IAM post,
looked for among its newest NAME_SCAN entries (a long feed without one is not read
whole on every start).
"""
from tssb import feedforks, posts

NAME_SCAN = 256    # newest entries of a feed searched for its IAM name
NAME_MAX = 64      # characters of a display name kept (an IAM may hold 64 KiB)
PAGE_MAX = 100     # posts per request at most
PAGE_DEFAULT = 30
SEQ_MAX = 0xFFFFFFFF


def _as_dict(p, names):
    d = p.as_dict()
    d["author"] = posts.author(p.fid, names)
    return d


class FeedIndex:
    """Args:
        store: the host store.  own: the host's feed id (bytes) or None.
        missing: function(fid) -> chunks still missing in the feed's side chains, or None
            when unknown (no node in this process).
        clock: function() -> Unix ms.
        decorate: function(Post, names) -> dict for the page (default: as_dict + author).
        keys: tssb.chat.box.Keys to open boxes addressed to us, or None.
    """

    def __init__(self, store, own=None, missing=None, clock=None, decorate=None, keys=None):
        self.store = store
        self.own = bytes(own) if own is not None else None
        self.missing = missing or (lambda fid: None)
        self.clock = clock or (lambda: 0)
        self.decorate = decorate or _as_dict
        self.keys = keys
        self.feeds = {}     # fid -> summary dict
        self._partial = {}  # fid -> lowest seq whose side chain was incomplete when read

    def _name(self, fid, first, last):
        """(latest IAM name among seqs first..last or None, lowest seq still partial)."""
        partial = None
        for seq in range(last, max(first, last - NAME_SCAN + 1) - 1, -1):
            p = posts.read(self.store, fid, seq)
            if p is None:
                continue
            if p.kind == posts.PARTIAL:
                partial = seq     # an IAM may still be arriving in its side chain
            elif p.kind == posts.NAME and p.text.strip():
                return p.text.strip()[:NAME_MAX], partial
        return None, partial

    def refresh(self, only=None):
        """Re-read the store (or only the feeds in `only`, a set of fids).

        Returns: summaries of the feeds that are new or changed.
        """
        changed = []
        fids = self.store.feeds() if only is None else [f for f in only if self.store.has_feed(f)]
        for fid in fids:
            fid = bytes(fid)
            front = self.store.front(fid)[0]
            missing = self.missing(fid)
            forks = feedforks.of_feed(self.store, fid)
            old = self.feeds.get(fid)
            if old is not None and old["front"] == front and old["missing"] == missing and \
                    old["forks"] == forks:
                continue
            first = old["front"] + 1 if old is not None else 1
            if old is not None and self._partial.get(fid):
                first = min(first, self._partial[fid])
            name, self._partial[fid] = self._name(fid, first, front)
            s = {"fid": fid.hex(), "front": front, "own": fid == self.own,
                 "name": name if name is not None else (old or {}).get("name"),
                 "missing": missing, "forks": forks,
                 "updated": self.clock() if old is None or front != old["front"]
                 else old["updated"]}
            self.feeds[fid] = s
            changed.append(s)
        return changed

    def summaries(self):
        """All feeds: own feed first, then the most recently updated."""
        return sorted(self.feeds.values(), key=lambda s: (not s["own"], -s["updated"], s["fid"]))

    def page(self, fid, before=None, limit=PAGE_DEFAULT):
        """Posts of a feed, newest first, with seq < before (None: from the front).

        Returns: (list of dicts (decorate's), boxes not addressed to us left out).
        Raises: KeyError for an unknown feed.
        """
        fid = bytes(fid)
        if not self.store.has_feed(fid):
            raise KeyError(fid)
        top = self.store.front(fid)[0]
        stop = top if before is None else min(top, before - 1)
        known = {f: s["name"] for f, s in self.feeds.items() if s["name"]}
        out = []
        sealed = 0
        for p in posts.feed_posts(self.store, fid, start=max(1, stop - limit + 1), stop=stop,
                                  newest_first=True, limit=limit, keys=self.keys):
            if p.private == posts.SEALED:
                sealed += 1
                continue
            out.append(self.decorate(p, known))
        return out, sealed
