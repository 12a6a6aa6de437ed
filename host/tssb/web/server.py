"""The HTTP and WebSocket side of `tssb web` (aiohttp).

Routes:
  GET  /                  the page (assets from this package: no CDN, works offline)
  GET  /static/<file>     its script and style
  GET  /api/state         everything the page shows, as JSON (also the first WS message)
  GET  /api/posts         ?feed=HEX[&before=SEQ][&limit=N]: decoded posts, newest first
  POST /api/post          {"text": "..."}: a public post (the app's TAV) on the host's feed
  GET  /api/chats         the public chat and the private chats addressed to us
  GET  /api/chat          ?key=KEY[&limit=N]: a chat's newest posts, oldest first
  POST /api/dm            {"text": "...", "to": [feed id hex, ...]}: a private post; the
                          answer names the members we hold nothing of ("unheard", with
                          a "warning": the app loses a group message to them)
  POST /api/read          {"key": KEY, "limit": N}: the page showed that chat: read receipts
                          (POSTs are CSRF-protected)
  GET  /ws                live updates (pkt, feeds, status, sync, gap), server -> browser

Security (the mesh is untrusted; so is any other web page the user has open):
- The page renders every string with textContent (never as HTML) and the server sends
  a Content-Security-Policy allowing only its own script, so mesh text cannot run.
- On loopback the Host header must name this server (a DNS-rebinding page cannot
  reach it); bound beyond loopback, every request needs the access token printed at
  start (`?token=` once, then an HttpOnly SameSite=Strict cookie).
- POST and the WebSocket need an Origin equal to this server's; POST also needs the
  per-run CSRF token the page got from /api/state (X-CSRF-Token header).
- Request bodies are capped (MAX_BODY); browsers are bounded by the hub (MAX_CLIENTS,
  CLIENT_QUEUE) and the socket's write buffer (WS_WRITE_LIMIT).
"""
import asyncio
import hmac
import ipaddress
import json
import logging
import os
import secrets

from aiohttp import WSMsgType, web

from tssb import ownfeed
from tssb.chat import apphazard, appmsg, box, inbox as inboxmod
from tssb.safeparse import InputError, json_loads
from tssb.web import feeds as feedsmod

log = logging.getLogger("tssb.web")

STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
ASSETS = {"app.js": "text/javascript", "app.css": "text/css"}
TOKEN_COOKIE = "tssb_web_token"
CSRF_HEADER = "X-CSRF-Token"

MAX_BODY = 16 * 1024          # a post request: the text and a little JSON
MAX_BODY_DEPTH = 4            # {"text": "..."}: anything nested deeper is not ours
# Longest post from the form: 2048 bytes is 21 side-chain chunks, ~4.3 s of airtime at
# SF7/125 kHz, an eighth of an EU868 board's hourly 1 % budget (tssbfw.regions).
MAX_POST_BYTES = 2048
WS_WRITE_LIMIT = 64 * 1024    # bytes aiohttp buffers per socket before a send waits
WS_MAX_IN = 4096              # the page sends nothing but pings; anything bigger is abuse
HEARTBEAT_S = 20.0            # ping browsers; a dead one is closed after no pong
SEND_TIMEOUT_S = 30.0         # a browser that accepts nothing for this long is dropped
PAGE_BYTES = 256 * 1024       # text per /api/posts answer (posts may be 64 KiB each)

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


def is_loopback(host):
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Guard:
    """Who may talk to this server.

    Args:
        bind: the address served.  token: access token, or None (loopback only).
    """

    def __init__(self, bind, token=None):
        self.loopback = is_loopback(bind)
        if not self.loopback and not token:
            raise ValueError("serving beyond loopback needs an access token")
        self.token = token
        self.csrf = secrets.token_urlsafe(24)
        self.port = None   # set once listening

    def host_ok(self, host):
        if not self.loopback:
            return True        # the token guards it; a proxy may use any name
        return host in ("127.0.0.1:%d" % self.port, "localhost:%d" % self.port,
                        "[::1]:%d" % self.port)

    def origin_ok(self, request):
        origin = request.headers.get("Origin")
        return origin is not None and origin == "%s://%s" % (request.scheme, request.host)

    def token_ok(self, request):
        if self.token is None:
            return True
        got = request.cookies.get(TOKEN_COOKIE) or request.query.get("token") or ""
        return hmac.compare_digest(got.encode(), self.token.encode())

    def csrf_ok(self, request):
        got = request.headers.get(CSRF_HEADER, "")
        return self.origin_ok(request) and hmac.compare_digest(got.encode(), self.csrf.encode())


def _error(status, message):
    return web.json_response({"error": message}, status=status)


def make_app(view, guard):
    """The aiohttp application of a view (tssb.web.view.WebView)."""
    assets = {}
    for name in ("index.html",) + tuple(ASSETS):
        with open(os.path.join(STATIC, name), "rb") as f:
            assets[name] = f.read()

    @web.middleware
    async def protect(request, handler):
        if not guard.host_ok(request.host):
            resp = _error(421, "unknown host name")
        elif not guard.token_ok(request):
            resp = _error(401, "access token missing or wrong: open the URL tssb web printed")
        elif guard.token is not None and "token" in request.query and request.method == "GET":
            # first visit with ?token=: keep it in a cookie, drop it from the address bar
            url = request.rel_url.with_query(
                {k: v for k, v in request.query.items() if k != "token"})
            resp = web.Response(status=302, headers={"Location": str(url)})
            resp.set_cookie(TOKEN_COOKIE, guard.token, httponly=True, samesite="Strict",
                            path="/")
        else:
            try:
                resp = await handler(request)
            except web.HTTPException as e:      # unknown route or method
                resp = _error(e.status, e.reason)
            except Exception:                   # a bug of ours: still with the headers
                log.exception("internal error answering %s %s", request.method,
                              request.path)
                resp = _error(500, "internal error")
        if resp.prepared:      # a WebSocket: its headers are gone already
            return resp
        h = resp.headers
        h["Content-Security-Policy"] = CSP
        h["X-Content-Type-Options"] = "nosniff"
        h["Referrer-Policy"] = "no-referrer"
        h["X-Frame-Options"] = "DENY"
        h.setdefault("Cache-Control", "no-store")
        return resp

    async def index(request):
        return web.Response(body=assets["index.html"], content_type="text/html", charset="utf-8")

    async def static(request):
        name = request.match_info["name"]
        if name not in ASSETS:
            raise web.HTTPNotFound()
        return web.Response(body=assets[name], content_type=ASSETS[name], charset="utf-8")

    async def state(request):
        out = view.state()
        out["csrf"] = guard.csrf
        return web.json_response(out)

    async def posts(request):
        q = request.query
        try:
            fid = bytes.fromhex(q.get("feed", ""))
            before = int(q["before"]) if "before" in q else None
            limit = int(q.get("limit", feedsmod.PAGE_DEFAULT))
        except ValueError:
            return _error(400, "feed must be 64 hex digits, before and limit integers")
        if len(fid) != 32:
            return _error(400, "feed must be 64 hex digits")
        if before is not None and not 1 <= before <= feedsmod.SEQ_MAX + 1:
            return _error(400, "before out of range")
        if not 1 <= limit <= feedsmod.PAGE_MAX:
            return _error(400, "limit must be 1..%d" % feedsmod.PAGE_MAX)
        try:
            page, sealed = view.feeds.page(fid, before, limit)
        except KeyError:
            return _error(404, "no such feed")
        return web.json_response({"feed": fid.hex(), "posts": _capped(page),
                                  "sealed": sealed})

    async def _text_body(request):
        """(dict, text) of a JSON POST with a post's text, or (None, error response)."""
        if not guard.csrf_ok(request):
            return None, _error(403, "cross-site request refused")
        if request.content_type != "application/json":
            return None, _error(415, "send JSON")
        try:
            data = json_loads(await request.read(), MAX_BODY, MAX_BODY_DEPTH, "JSON")
        except web.HTTPRequestEntityTooLarge:
            return None, _error(413, "request too large")
        except InputError as e:
            return None, _error(400, str(e))
        text = data.get("text") if isinstance(data, dict) else None
        if not isinstance(text, str):
            return None, _error(400, "text missing")
        try:
            n = len(text.encode("utf-8"))
        except UnicodeError:
            return None, _error(400, "text is not valid Unicode")
        if not text.strip():
            return None, _error(400, "nothing to post: the text is empty")
        if n > MAX_POST_BYTES:
            return None, _error(413, "post too long: %d bytes, at most %d" % (n, MAX_POST_BYTES))
        return data, text

    async def post(request):
        data, text = await _text_body(request)
        if data is None:
            return text
        try:
            seq = view.post(appmsg.tav(text))
        except ownfeed.FeedBehind as e:
            return _error(409, "refused: %s" % e)
        except (ValueError, OSError) as e:
            return _error(500, "cannot post: %s" % e)
        return web.json_response({"fid": view.own_fid(), "seq": seq})

    async def dm(request):
        data, text = await _text_body(request)
        if data is None:
            return text
        to = data.get("to")
        if not isinstance(to, list) or not to or len(to) > box.MAX_RECIPIENTS:
            return _error(400, "to: a list of 1 to %d feed ids" % box.MAX_RECIPIENTS)
        try:
            keys = [bytes.fromhex(t) for t in to if isinstance(t, str)]
        except ValueError:
            keys = []
        if len(keys) != len(to) or any(len(k) != 32 for k in keys):
            return _error(400, "to: feed ids of 64 hex digits")
        try:
            seq, key, unheard = view.dm(text, keys)
        except box.BoxError as e:
            return _error(400, str(e))
        except ownfeed.FeedBehind as e:
            return _error(409, "refused: %s" % e)
        except (ValueError, OSError) as e:
            return _error(500, "cannot send: %s" % e)
        out = {"fid": view.own_fid(), "seq": seq, "chat": key,
               "unheard": [m.hex() for m in unheard]}
        if unheard:
            out["warning"] = apphazard.unheard_warning(unheard, view.names())
        return web.json_response(out)

    async def read(request):
        if not guard.csrf_ok(request):
            return _error(403, "cross-site request refused")
        try:
            data = json_loads(await request.read(), MAX_BODY, MAX_BODY_DEPTH, "JSON")
        except web.HTTPRequestEntityTooLarge:
            return _error(413, "request too large")
        except InputError as e:
            return _error(400, str(e))
        key = data.get("key") if isinstance(data, dict) else None
        limit = data.get("limit", feedsmod.PAGE_DEFAULT) if isinstance(data, dict) else None
        if not isinstance(key, str) or not _is_chat_key(key) or \
                not isinstance(limit, int) or not 1 <= limit <= feedsmod.PAGE_MAX:
            return _error(400, "key: a private chat's key; limit 1..%d" % feedsmod.PAGE_MAX)
        try:
            n = view.read(key, limit)
        except KeyError:
            return _error(404, "no such chat")
        except (ValueError, OSError) as e:
            return _error(500, "cannot send receipts: %s" % e)
        return web.json_response({"key": key, "receipts": n})

    async def chats(request):
        return web.json_response(view.chats())

    async def chat(request):
        key = request.query.get("key", "")
        try:
            limit = int(request.query.get("limit", feedsmod.PAGE_DEFAULT))
        except ValueError:
            return _error(400, "limit must be an integer")
        if not 1 <= limit <= feedsmod.PAGE_MAX:
            return _error(400, "limit must be 1..%d" % feedsmod.PAGE_MAX)
        if key != inboxmod.PUBLIC and not _is_chat_key(key):
            return _error(400, "key: 'public' or sorted feed ids, comma-separated")
        try:
            got = view.chat(key, limit)
        except KeyError:
            return _error(404, "no such chat")
        return web.json_response({"key": key, "posts": _capped(got[::-1])[::-1]})

    async def ws(request):
        if not guard.origin_ok(request):
            return _error(403, "cross-site WebSocket refused")
        client = view.hub.add_client()
        if client is None:
            return _error(503, "too many browsers connected")
        sock = web.WebSocketResponse(heartbeat=HEARTBEAT_S, max_msg_size=WS_MAX_IN,
                                     compress=False, writer_limit=WS_WRITE_LIMIT)
        try:
            await sock.prepare(request)
            client.offer(json.dumps(dict(view.state(), t="state", csrf=guard.csrf),
                                    separators=(",", ":")))
            pump = asyncio.ensure_future(_pump(sock, client))
            try:
                async for msg in sock:
                    if msg.type == WSMsgType.ERROR:
                        break
            finally:
                pump.cancel()
        finally:
            view.hub.remove_client(client)
        return sock

    app = web.Application(middlewares=[protect], client_max_size=MAX_BODY)
    app.router.add_get("/", index)
    app.router.add_get("/static/{name}", static)
    app.router.add_get("/api/state", state)
    app.router.add_get("/api/posts", posts)
    app.router.add_post("/api/post", post)
    app.router.add_post("/api/dm", dm)
    app.router.add_post("/api/read", read)
    app.router.add_get("/api/chats", chats)
    app.router.add_get("/api/chat", chat)
    app.router.add_get("/ws", ws)
    return app


def _capped(page):
    """The posts of a page up to PAGE_BYTES of text (at least one)."""
    out, size = [], 0
    for p in page:
        size += len(p["text"])
        if out and size > PAGE_BYTES:
            break
        out.append(p)
    return out


def _is_chat_key(key):
    parts = key.split(",")
    return 1 <= len(parts) <= box.MAX_RECIPIENTS and all(
        len(h) == 64 and all(c in "0123456789abcdef" for c in h) for h in parts)


async def _pump(sock, client):
    try:
        while True:
            for text in await client.next():
                await asyncio.wait_for(sock.send_str(text), SEND_TIMEOUT_S)
    except asyncio.TimeoutError:
        log.info("browser stalled for %.0f s: closed", SEND_TIMEOUT_S)
        await sock.close()
    except (ConnectionError, RuntimeError):
        pass    # the browser went away


async def start(view, bind, port, token=None):
    """Serve `view`; returns (AppRunner, Guard, actual port).

    Raises: OSError when the address cannot be bound; ValueError without a token
    beyond loopback.
    """
    guard = Guard(bind, token)
    runner = web.AppRunner(make_app(view, guard), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, bind, port)
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    guard.port = runner.addresses[0][1]
    return runner, guard, guard.port
