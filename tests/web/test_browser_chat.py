"""The web view's chats in a real browser (headless Chromium, as test_browser.py): a
private message from the board's author is opened and shown in its chat with the
author's name; a reply from the page is the app's box, its ticks appear as the board
takes it, and reading the board's message sent it a read receipt (ACK); a group message
with a feed we hold nothing of is sent with a warning."""
import os

import bipf as pub
import nacl.bindings as nb
import pytest
from tinyssb import bipf, crypto
from tssb import posts
from tssb.chat import appmsg, box
from tssb.context import Context
from tssb.web import rig

REASON = rig.missing_reason()
if REASON and os.environ.get("CI"):
    raise RuntimeError("browser tests cannot run in CI: " + REASON)
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

BOARD_SEED = b"\x05" * 32
WAIT_MS = 60000
REPLICATE_S = 60.0


def test_chats_view_opens_replies_and_shows_ticks(tmp_path):
    from playwright.sync_api import sync_playwright
    home = str(tmp_path / "home")
    ctx = Context.open(home)
    me = ctx.identity.public
    ctx.close()
    board = crypto.publickey(BOARD_SEED)
    dm, _ = appmsg.private_tav(board, [me], "are you there? <b>bold</b>")
    r = rig.Rig(home, posts=[appmsg.iam("Kiosk"), dm, appmsg.tav("public hello")],
                seed=BOARD_SEED)
    r.start()
    pw = sync_playwright().start()
    browser = rig.launch(pw)
    page = browser.new_page(viewport={"width": 1000, "height": 640})
    problems = []
    page.on("pageerror", lambda e: problems.append("page error: %s" % e))
    try:
        page.goto(r.url.split("?")[0] + "#chats")
        item = page.locator("#chat-list li", has_text="Kiosk")
        item.wait_for(timeout=WAIT_MS)
        assert "\U0001f512 [Kiosk" in item.inner_text()
        item.click()
        page.locator("#chat-posts li", has_text="are you there?").wait_for(timeout=WAIT_MS)
        assert page.locator("#chat-posts b").count() == 0       # text, never HTML
        page.fill("#chat-text", "yes, here")
        page.click("#chat-send")
        mine = page.locator("#chat-posts li", has_text="yes, here")
        mine.wait_for(timeout=WAIT_MS)
        # the stages as seen: stored at once, then on the board once it took it
        assert rig.wait(lambda: "on the board" in mine.locator(".stages").inner_text(),
                        REPLICATE_S, 0.5)
        # the board holds what the host wrote for it, each a box only it (and we) open:
        # its delivered and read receipts for its message, and our reply
        keys = box.Keys(nb.crypto_sign_seed_keypair(BOARD_SEED)[1])

        def board_opens():
            tags = []
            for seq in range(1, (r.store.front(me)[0] if r.store.has_feed(me) else 0) + 1):
                got = posts.entry_content(r.store, me, seq)
                if got is not None and got[1]:
                    opened = box.open_box(bipf.decode(got[0]), keys)
                    tags.append(pub.loads(opened.plain)[0] if opened else None)
            return tags
        assert rig.wait(lambda: {"TAV", "DLV", "ACK"} <= set(board_opens()), REPLICATE_S, 0.5), \
            board_opens()
        page.locator("#chat-list li", has_text="public").click()
        page.locator("#chat-posts li", has_text="public hello").wait_for(timeout=WAIT_MS)
        # a group with a feed we hold nothing of: sent, with the warning under the form
        new = crypto.publickey(b"\x06" * 32).hex()
        page.fill("#newchat-to", "Kiosk, " + new)
        page.click("#newchat-form button")
        page.fill("#chat-text", "to you both")
        page.click("#chat-send")
        msg = page.locator("#chat-msg")
        assert rig.wait(lambda: "Warning" in msg.inner_text(), REPLICATE_S, 0.2), \
            msg.inner_text()
        assert new[:8] in msg.inner_text() and "Kiosk" not in msg.inner_text().split(
            "Warning")[1]
        assert problems == []
    finally:
        browser.close()
        pw.stop()
        r.stop()
