"""`tssb web`: a live view of the host in a browser (feeds and posts, a post form, the
bridged board's traffic, neighbours, GOSET and replication, airtime, host syncs).

  view.py      WebView: runs alone on a store or inside the bridge's process
  server.py    aiohttp routes, WebSocket, access token / Host / Origin / CSRF checks
  hub.py       live state and the bounded fan-out to browsers
  traffic.py   what each packet is and what the node did with it
  feeds.py     feed fronts, names and pages of decoded posts (tssb.posts)
  eventlog.py  following the host's JSONL event log
  static/      the page (plain HTML, CSS and JavaScript; no CDN)
"""
