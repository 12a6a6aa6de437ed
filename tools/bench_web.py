"""`tssb web` benchmarks, in headless Chromium against `tssb web --serial PTY` on loopback
with a simulated board (tssb.web.rig). One JSON object per line:

  latency      a packet the board's radio receives -> its row in the browser's DOM
               (MutationObserver time), p50/p95 over 200 packets at 20/s; also from the
               host's receipt (the row's server time) to the DOM. Bar: p95 <= 250 ms.
  first_load   bytes transferred for the first page load (HTTP bodies and headers plus
               WebSocket frames until the page has drawn its state, with the traffic
               backlog full), and requests to anywhere else. Bar: <= 300 KB, none.
  load         10 browsers connected for 60 s while 20 packets/s arrive, plus 2 raw
               WebSocket clients that never read (stalled): RSS growth of the tssb web
               process from after a warm-up to the end. Bar: <= 32 MiB.

Run: .venv/bin/python tools/bench_web.py [--seconds 60] [--browsers 10]
Needs Debian's chromium (make browser).
"""
import argparse
import asyncio
import json
import random
import sys
import tempfile
import threading
import time

from tinyssb.store import MemStore
from tssb.web import rig
from tinyssb.eventlog import packet_id

LATENCY_PACKETS = 200
RATE_PER_S = 20
LATENCY_BAR_MS = 250
FIRST_LOAD_BAR = 300 * 1000
RSS_BAR = 32 * 1024 * 1024
WARMUP_S = 10
STALLED_CLIENTS = 2

# Records when each traffic row (data-id) enters the DOM, in Unix ms.
OBSERVE = """() => {
  window.__seen = {};
  const body = document.querySelector('#traffic-table tbody');
  new MutationObserver((muts) => {
    const t = performance.timeOrigin + performance.now();
    for (const m of muts) for (const n of m.addedNodes)
      if (n.dataset && n.dataset.id && !(n.dataset.id in window.__seen)) window.__seen[n.dataset.id] = t;
  }).observe(body, {childList: true});
}"""


def emit(**kw):
    print(json.dumps(kw), flush=True)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def bench_latency(r, browser):
    s = MemStore()
    fid = rig.author_feed(s, b"\x03" * 32, [b"bench %d" % i for i in range(LATENCY_PACKETS)])
    pkts = [s.entry(fid, i) for i in range(1, LATENCY_PACKETS + 1)]
    page = browser.new_page()
    page.goto(r.url.split("?")[0] + "#traffic")
    page.wait_for_selector("#live.on", timeout=15000)
    page.evaluate(OBSERVE)
    sent = {}
    for pkt in pkts:
        sent[packet_id(pkt)] = time.time() * 1000
        r.hear(pkt, rssi=-90, snr_db=5.0)
        time.sleep(1.0 / RATE_PER_S)
    seen = rig.wait(lambda: (lambda d: d if len(d) >= len(sent) else None)(
        page.evaluate("window.__seen")), 10) or page.evaluate("window.__seen")
    rows = {x["id"]: x["ts"] for x in _state(page)["traffic"] if "id" in x}
    lat = [seen[k] - t for k, t in sent.items() if k in seen]
    host = [seen[k] - rows[k] for k in sent if k in seen and k in rows]
    page.close()
    emit(bench="web", case="latency_radio_to_dom", packets=len(sent), seen=len(lat),
         rate_per_s=RATE_PER_S, p50_ms=round(pct(lat, 50), 1), p95_ms=round(pct(lat, 95), 1),
         max_ms=round(max(lat), 1), bar_ms=LATENCY_BAR_MS,
         ratio_to_bar=round(pct(lat, 95) / LATENCY_BAR_MS, 3))
    emit(bench="web", case="latency_host_to_dom", packets=len(host),
         p50_ms=round(pct(host, 50), 1), p95_ms=round(pct(host, 95), 1),
         share_of_radio_to_dom_p95=round(pct(host, 95) / pct(lat, 95), 3))
    return len(lat) == len(sent)


def _state(page):
    return page.evaluate("fetch('/api/state').then(r => r.json())")


# Posts on the host's feed before the first-load case, so its first page of posts is full.
POSTS = 30
POST_JS = """async (n) => {
  const st = await (await fetch('/api/state')).json();
  for (let i = 0; i < n; i++) {
    const r = await fetch('/api/post', {method: 'POST', headers: {'Content-Type':
      'application/json', 'X-CSRF-Token': st.csrf}, body: JSON.stringify({text:
      'post ' + i + ' from the benchmark, about two hundred bytes long: ' + 'x'.repeat(140)})});
    if (!r.ok) throw new Error(await r.text());
  }
}"""


def bench_first_load(r, browser):
    p = browser.new_page()
    p.goto(r.url)
    p.evaluate(POST_JS, POSTS)
    p.close()
    ctx = browser.new_context()
    page = ctx.new_page()
    reqs = []
    ws_bytes = [0]
    page.on("requestfinished", lambda q: reqs.append(q))
    page.on("websocket", lambda ws: ws.on(
        "framereceived", lambda payload: ws_bytes.__setitem__(0, ws_bytes[0] + len(payload))))
    page.goto(r.url)
    page.wait_for_selector("#live.on", timeout=15000)
    page.wait_for_selector("#posts li", timeout=15000)
    page.wait_for_load_state("networkidle")
    origin = r.url.split("/?")[0].rstrip("/")
    http = 0
    external = 0
    for q in reqs:
        if q.url.startswith("data:"):
            continue
        if not q.url.startswith(origin + "/"):
            external += 1
        sz = q.sizes()
        http += sz["responseBodySize"] + sz["responseHeadersSize"] + sz["requestHeadersSize"]
    backlog = len(_state(page)["traffic"])
    ctx.close()
    total = http + ws_bytes[0]
    emit(bench="web", case="first_load", requests=len(reqs), http_bytes=http,
         websocket_bytes=ws_bytes[0], total_bytes=total, traffic_backlog_rows=backlog,
         external_requests=external, bar_bytes=FIRST_LOAD_BAR,
         ratio_to_bar=round(total / FIRST_LOAD_BAR, 3))


async def _stalled(url, n, stop):
    """WebSocket clients that connect and never read: the server must not buffer for them."""
    import aiohttp
    origin = url.split("/?")[0].rstrip("/")
    async with aiohttp.ClientSession() as s:
        socks = [await s.ws_connect(origin + "/ws", headers={"Origin": origin},
                                    max_msg_size=0) for _ in range(n)]
        # not reading: the kernel buffers fill, then the server's bounded queues
        while not stop.is_set():
            await asyncio.sleep(0.2)
        for w in socks:
            await w.close()


def bench_load(r, browser, seconds, n_browsers):
    pages = []
    for _ in range(n_browsers):
        p = browser.new_context().new_page()
        p.goto(r.url.split("?")[0] + "#traffic")
        pages.append(p)
    for p in pages:
        p.wait_for_selector("#live.on", timeout=15000)
    stop = threading.Event()
    th = threading.Thread(target=lambda: asyncio.run(_stalled(r.url, STALLED_CLIENTS, stop)),
                          daemon=True)
    th.start()
    rnd = random.Random(7)
    sent = [0]
    done = threading.Event()

    def feed():
        # the packets arrive on their own clock; the sampling below does not pause them
        nxt = time.monotonic()
        while not done.is_set():
            r.hear(bytes([0x42]) + rnd.randbytes(119), rssi=-70 - rnd.randrange(40),
                   snr_db=rnd.randrange(-40, 40) / 4)
            sent[0] += 1
            nxt += 1.0 / RATE_PER_S
            time.sleep(max(0.0, nxt - time.monotonic()))
    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    time.sleep(WARMUP_S)
    rss0 = rig.rss_bytes(r.pid)
    n0 = sent[0]
    t0 = time.monotonic()
    samples = []
    while time.monotonic() - t0 < seconds:
        time.sleep(min(5.0, max(0.0, seconds - (time.monotonic() - t0))))
        samples.append(rig.rss_bytes(r.pid))
        for p in pages:       # the browsers keep drawing (a hung one would show here)
            p.evaluate("document.querySelectorAll('#traffic-table tbody tr').length")
    rss1 = rig.rss_bytes(r.pid)
    n1 = sent[0]
    elapsed = time.monotonic() - t0
    done.set()
    feeder.join(5)
    rows = [p.evaluate("document.querySelectorAll('#traffic-table tbody tr').length") for p in pages]
    stop.set()
    th.join(10)
    for p in pages:
        p.context.close()
    emit(bench="web", case="load_rss", browsers=n_browsers, stalled_clients=STALLED_CLIENTS,
         seconds=round(elapsed, 1), packets=n1 - n0,
         rate_per_s=round((n1 - n0) / elapsed, 1),
         rss_start_mib=round(rss0 / 2**20, 1), rss_end_mib=round(rss1 / 2**20, 1),
         rss_max_mib=round(max(samples + [rss1]) / 2**20, 1),
         growth_mib=round((rss1 - rss0) / 2**20, 2), bar_mib=RSS_BAR / 2**20,
         ratio_to_bar=round(max(0, rss1 - rss0) / RSS_BAR, 3),
         rows_in_each_browser=min(rows))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--browsers", type=int, default=10)
    args = ap.parse_args()
    why = rig.missing_reason()
    if why:
        emit(bench="web", case="skipped", reason=why)
        return 0
    from playwright.sync_api import sync_playwright
    with tempfile.TemporaryDirectory() as home:
        r = rig.Rig(home, posts=[b"bench board post %d" % i for i in range(5)]).start()
        try:
            with sync_playwright() as pw:
                browser = rig.launch(pw)
                try:
                    ok = bench_latency(r, browser)
                    bench_load(r, browser, args.seconds, args.browsers)
                    bench_first_load(r, browser)      # with the traffic backlog full
                finally:
                    browser.close()
        finally:
            r.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
