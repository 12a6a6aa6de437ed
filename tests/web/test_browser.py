"""`tssb web` in a real browser: headless Chromium (the system's, through Playwright)
against `tssb web --serial PTY` on loopback, driven by a simulated board on a
pseudo-terminal (tssb.web.rig). Screenshots of each view go to $TSSB_WEB_SHOTS
(default out/web) for docs/web.md.
"""
import os
import time

import pytest
from tinyssb import bipf
from tinyssb.store import MemStore
from tssb import posts
from tssb.context import EVENT_FILE, EventLog
from tssb.store import open_store
from tssb.web import rig
from tinyssb.eventlog import packet_id

REASON = rig.missing_reason()
if REASON and os.environ.get("CI"):
    raise RuntimeError("browser tests cannot run in CI: " + REASON)
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

XSS_POST = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
XSS_NAME = "Board <b>One</b><script>window.__pwned=3</script>"
LONG_POST = ("a side-chained post, line %d. " * 12) % tuple(range(12))
VIEWS = ("feeds", "traffic", "neighbours", "goset", "airtime", "syncs")
SEEN_S = 10.0         # a packet the board hears is in the page within this (bench: p95
                      # 5-63 ms; the margin is for a loaded 2-core machine)
WAIT_MS = 20000       # page updates (selectors) under the same load
REPLICATE_S = 60.0    # board <-> host replication over the pty at the board's 4x clock


def _neighbour_packets(n):
    """n distinct 120-byte entries of a feed no one here follows (a stranger's)."""
    s = MemStore()
    fid = rig.author_feed(s, b"\x02" * 32, [b"stranger %d" % i for i in range(n)])
    return [s.entry(fid, i) for i in range(1, n + 1)]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from playwright.sync_api import sync_playwright
    home = str(tmp_path_factory.mktemp("webhome"))
    r = rig.Rig(home, posts=[bipf.encode(["IAM", XSS_NAME]), b"hello from the board",
                             XSS_POST.encode(), LONG_POST.encode()])
    r.start()
    pw = sync_playwright().start()
    browser = rig.launch(pw)
    page = browser.new_page(viewport={"width": 1000, "height": 640})
    problems = []
    requests = []
    page.on("console", lambda m: problems.append("console %s: %s" % (m.type, m.text))
            if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append("page error: %s" % e))
    page.on("request", lambda q: requests.append(q.url))
    try:
        yield r, page, problems, requests
    finally:
        browser.close()
        pw.stop()
        r.stop()


def _feed_item(page, fid):
    return page.locator('#feed-list li[data-fid="%s"]' % fid.hex())


def test_page_loads_clean_and_shows_the_boards_feed(setup):
    r, page, problems, requests = setup
    page.goto(r.url)
    page.wait_for_selector("#live.on", timeout=WAIT_MS)
    # the board's feed reaches the host over the bridge and appears in the list
    _feed_item(page, r.fid).wait_for(timeout=REPLICATE_S * 1000)
    # every entry and side-chain chunk (the name is in a side chain too)
    assert rig.wait(lambda: "4 entries" in _feed_item(page, r.fid).inner_text()
                    and "missing" not in _feed_item(page, r.fid).inner_text(), REPLICATE_S)
    assert problems == []
    origin = r.url.split("/?")[0].rstrip("/")
    ws = "ws" + origin[len("http"):]
    assert requests and all(u.startswith(origin + "/") or u.startswith(ws + "/")
                            or u.startswith("data:") for u in requests), requests


def test_mesh_html_shows_as_text_and_runs_nothing(setup):
    r, page, problems, _ = setup
    item = _feed_item(page, r.fid)
    item.wait_for(timeout=REPLICATE_S * 1000)
    assert rig.wait(lambda: XSS_NAME in item.inner_text(), WAIT_MS / 1000)   # literally
    item.click()
    page.wait_for_selector('#posts li[data-seq="3"]', timeout=WAIT_MS)
    assert page.locator('#posts li[data-seq="3"] .text').inner_text() == XSS_POST
    assert page.locator('#posts li[data-seq="4"] .text').inner_text() == LONG_POST
    assert page.locator("#posts img, #posts script, #feed-list b").count() == 0
    assert page.evaluate("window.__pwned") is None
    assert problems == []


def test_post_from_the_form_reaches_list_store_and_board(setup):
    r, page, problems, _ = setup
    text = "hello from the browser <i>not italic</i> & co"
    page.fill("#post-text", text)
    page.click("#post-send")
    page.wait_for_selector("#post-msg:has-text('posted #1')", timeout=WAIT_MS)
    first = page.locator("#posts li").first
    assert first.get_attribute("data-seq") == "1"
    assert first.locator(".text").inner_text() == text
    assert page.locator("#posts i").count() == 0
    me = page.locator("#feed-list li.current")
    assert "this host" in me.inner_text() and "1 entry" in me.inner_text()
    # in the host's store (read here while tssb web writes: SQLite WAL) ...
    store = open_store(r.home)
    try:
        own = [f for f in store.feeds() if f != r.fid and store.front(f)[0] == 1]
        assert len(own) == 1
        assert posts.read(store, own[0], 1).text == text
    finally:
        store.close()
    # ... and it goes out over the bridge: the board fetches it from the host
    assert rig.wait(lambda: r.store.has_feed(own[0]) and r.store.front(own[0])[0] == 1,
                    REPLICATE_S, 0.2), r.lines[-5:]
    assert problems == []


def test_packet_heard_by_the_board_appears_live(setup):
    r, page, problems, _ = setup
    page.goto(r.url.split("?")[0] + "#traffic")
    page.wait_for_selector("#live.on", timeout=WAIT_MS)
    for i, pkt in enumerate(_neighbour_packets(3)):
        t0 = time.monotonic()
        r.hear(pkt, rssi=-100 + i, snr_db=-2.25)
        row = page.wait_for_selector('#traffic-table tr[data-id="%s"]' % packet_id(pkt),
                                     timeout=SEEN_S * 1000)
        assert time.monotonic() - t0 < SEEN_S
        cells = [c.inner_text() for c in row.query_selector_all("td")]
        # time, dir, from, kind, feed, seq, bytes, RSSI, SNR, result
        assert cells[1:4] == ["rx", "air", "pkt120"]
        assert cells[6:9] == ["120", str(-100 + i), "-2.25"]
        assert cells[9] == "dropped: unknown_dmx"       # a feed the host does not follow
    assert problems == []


def test_syncs_and_screenshots_of_every_view(setup):
    r, page, problems, _ = setup
    # a host sync as `tssb sync` logs it in the same home
    log = EventLog(os.path.join(r.home, EVENT_FILE), "host-test")
    log.emit("sync_done", proto="setu", peer="ab" * 32, ok=True, mode="differential",
             rounds=2, bytes_sent=1399, bytes_recv=8697, elements_sent=3, elements_recv=12,
             duration_ms=184.5)
    page.goto(r.url.split("?")[0] + "#syncs")
    row = page.wait_for_selector("#syncs-table tbody tr", timeout=WAIT_MS)
    cells = [c.inner_text() for c in row.query_selector_all("td")]
    assert cells[1:5] == ["setu", "abababab", "ok", "differential"]
    assert cells[6:8] == ["1399", "8697"]
    out = os.environ.get("TSSB_WEB_SHOTS") or os.path.join("out", "web")
    os.makedirs(out, exist_ok=True)
    page.goto(r.url.split("?")[0] + "#feeds")
    _feed_item(page, r.fid).click()
    page.wait_for_selector('#posts li[data-seq="4"]', timeout=WAIT_MS)
    for i, pkt in enumerate(_neighbour_packets(4)):
        r.hear(pkt, rssi=-95 - 3 * i, snr_db=4.5 - i)
    for v in VIEWS:
        page.goto(r.url.split("?")[0] + "#" + v)
        page.wait_for_selector("#view-%s.current" % v)
        time.sleep(0.3 if v != "airtime" else 1.5)    # a status push
        path = os.path.join(out, v + ".png")
        page.screenshot(path=path)
        _shrink(path)
        assert os.path.getsize(path) > 0
    assert problems == []


def _shrink(path):
    """Fewer colours for the docs' copies (Pillow comes with matplotlib)."""
    try:
        from PIL import Image
    except ImportError:
        return
    Image.open(path).convert("RGB").quantize(64).save(path, optimize=True)
