"""End to end over a pseudo-terminal: host bridge <-> firmware node code, both ways."""
import asyncio

from tinyssb import link
from tssb.bridge.serial_link import BoardPort, SerialLink
from tssb.context import Identity

from bridge_device import Device, Noise
from bridge_helpers import has_all, host, wait_for


HOST_NOW_MS = 1767225600000   # what the host's clock says when the board connects


async def _attach(h, resolve):
    port = BoardPort(h, clock=lambda: HOST_NOW_MS)
    sl = SerialLink(resolve, port.on_message, loop=asyncio.get_running_loop(),
                    hello=link.hello("host", "test"), reconnect_s=0.2)
    port.link = sl
    h.attach(port)
    sl.start()
    return port, sl


def _same_feed(a_store, b_store, fid, n):
    return all(a_store.entry(fid, s) == b_store.entry(fid, s) is not None
               for s in range(1, n + 1))


def _run(noise=None, entries=6):
    async def main():
        h = host()
        ident = Identity.generate()
        dev = Device(ident, noise=noise)
        for i in range(entries):
            dev.link.post(b"board %d" % i)
        dev.link.post(b"long board text " * 20)
        for i in range(entries):
            h.post(b"host %d" % i)
        hf, df = h.node.author.fid, ident.public
        h.node.follow(df)
        dev.link.node.follow(hf)
        dev.start()
        port, sl = await _attach(h, lambda: dev.port_name)
        task = asyncio.ensure_future(h.run())
        try:
            ok = await wait_for(lambda: has_all(h.store, df, entries + 1)
                                and h.store.chunk_count(df, entries + 1)
                                == dev.store.chunk_count(df, entries + 1)
                                and has_all(dev.store, hf, entries), 60)
            assert ok, (h.node.counters, dev.link.node_counters(), sl.decoder.counters)
            assert _same_feed(h.store, dev.store, df, entries + 1)
            assert _same_feed(dev.store, h.store, hf, entries)
            assert port.device is not None and port.device["fid"] == df.hex()
            # a status request is answered through the link; the board's HELLO got the
            # host's time (with noise on, the HELLO itself may be lost)
            if noise is None:
                assert ("set_epoch", HOST_NOW_MS) in dev.replies
                got = await port.request(link.status_request)
                assert got == {"feeds": len(dev.store.feeds())}
            return sl, dev, h, port
        finally:
            task.cancel()
            sl.stop()
            dev.stop()
    return asyncio.run(main())


def test_pty_replicates_both_ways():
    sl, dev, h, port = _run()
    assert sl.decoder.counters == {}
    assert port.counts["tx_mirror"] > 0


def test_pty_line_noise_resync_no_entry_lost():
    noise = Noise(0.002, seed=3)
    sl, dev, h, port = _run(noise)
    # the noise really hit frames and the decoder dropped them, yet everything arrived
    assert sum(noise.counts.values()) > 0
    assert sum(sl.decoder.counters.values()) > 0
    assert h.node.counters.get("drop_internal_error", 0) == 0


def test_reconnect_after_unplug():
    async def main():
        h = host()
        ident = Identity.generate()
        dev = Device(ident)
        dev.link.post(b"first")
        h.node.follow(ident.public)
        dev.start()
        current = {"dev": dev}
        port, sl = await _attach(h, lambda: current["dev"].port_name)
        task = asyncio.ensure_future(h.run())
        try:
            assert await wait_for(lambda: has_all(h.store, ident.public, 1), 30)
            dev.stop()                                   # unplug: the pty goes away
            dev2 = Device(ident, store=dev.store)        # plugged in again, new name
            dev2.link.post(b"second")
            dev2.start()
            current["dev"] = dev2
            assert await wait_for(lambda: has_all(h.store, ident.public, 2), 30)
            assert sl.connects >= 2
            dev2.stop()
        finally:
            task.cancel()
            sl.stop()
    asyncio.run(main())
