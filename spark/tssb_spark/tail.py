"""Complete lines appended to live log files since the last ingest, each exactly once.

A producer writes a log under a `.live` name (`X.jsonl.live`) and closes it by renaming it
to `X.jsonl` (docs/events.md). Closed files go through the normal ingest (a streaming file
source sees each once). For live files, LAKE/_tail/state.json remembers per path the file's
identity (device, inode) and how many bytes of it were ingested. Each run copies the
bytes from there up to the last newline into LAKE/_tail/inbox/ (a line still being written
waits for the next run), the ingest processes those copies, and only then the offsets
move on (`commit`). A crash in between makes the next run read the same bytes again,
which the id dedupe absorbs. When the live file is closed, its closed copy is ingested
whole; lines already taken from the live file are duplicates by id and add nothing.

Local files only (the state needs inodes): an input on HDFS or S3 has no live files.
"""
import hashlib
import json
import os

LIVE_SUFFIX = ".jsonl.live"
STATE_DIR = "_tail"
INBOX_SUFFIX = ".tail"  # not *.jsonl: the lake may sit inside the input directory
COPY_BLOCK = 1 << 20    # bytes copied at a time: memory stays bounded whatever the file


def _state_path(lake):
    return os.path.join(lake, STATE_DIR, "state.json")


def load_state(lake):
    """Returns: {live file path: {"dev", "ino", "offset"}} (empty when none or unreadable)."""
    try:
        with open(_state_path(lake), encoding="utf-8") as f:
            state = json.load(f)
        return state if isinstance(state, dict) else {}
    except (OSError, ValueError):
        return {}


def live_files(input_dir):
    """Returns: sorted paths of the live (*.jsonl.live) files under input_dir."""
    out = []
    for base, dirs, files in os.walk(input_dir):
        dirs.sort()
        out.extend(os.path.join(base, n) for n in files if n.endswith(LIVE_SUFFIX))
    return sorted(out)


def _copy_complete_lines(path, offset, dest):
    """Copy path[offset:] up to and including its last newline into dest.

    Returns: the number of bytes copied (0 when no complete new line; dest then absent).
    """
    copied = last_nl = 0
    with open(path, "rb") as src, open(dest, "wb") as out:
        src.seek(offset)
        while True:
            block = src.read(COPY_BLOCK)
            if not block:
                break
            out.write(block)
            nl = block.rfind(b"\n")
            if nl >= 0:
                last_nl = copied + nl + 1
            copied += len(block)
        out.truncate(last_nl)
    if not last_nl:
        os.remove(dest)
    return last_nl


def collect(input_dir, lake):
    """Copy the new complete lines of every live file into the lake's inbox.

    Args:
      input_dir: the ingest's input directory (local).
      lake: the lake directory (local).
    Returns:
      (inbox files, pending state): inbox is a list of (copy path, live file path); pass
      the state to commit() once the copies are ingested.
    """
    old = load_state(lake)
    inbox = os.path.join(lake, STATE_DIR, "inbox")
    os.makedirs(inbox, exist_ok=True)
    for n in os.listdir(inbox):          # copies of a run that did not finish
        os.remove(os.path.join(inbox, n))
    state, copies = {}, []
    for path in live_files(input_dir):
        path = os.path.abspath(path)
        try:
            st = os.stat(path)
        except FileNotFoundError:        # closed (renamed) while we looked
            continue
        prev = old.get(path)
        offset = 0
        if (isinstance(prev, dict) and prev.get("dev") == st.st_dev
                and prev.get("ino") == st.st_ino and 0 <= prev.get("offset", -1) <= st.st_size):
            offset = prev["offset"]      # same file as last time, not truncated
        dest = os.path.join(inbox, "%s-%d%s" % (
            hashlib.sha1(path.encode()).hexdigest()[:16], offset, INBOX_SUFFIX))
        n = _copy_complete_lines(path, offset, dest) if st.st_size > offset else 0
        if n:
            copies.append((dest, path))
        state[path] = {"dev": st.st_dev, "ino": st.st_ino, "offset": offset + n}
    return copies, state


def commit(lake, state, copies):
    """Record the new offsets (atomically) and drop the ingested copies."""
    path = _state_path(lake)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f, sort_keys=True)
    os.replace(tmp, path)
    for dest, _ in copies:
        try:
            os.remove(dest)
        except FileNotFoundError:
            pass
