"""The running bridge's control socket: board requests from other `tssb` commands.

While `tssb bridge` (or `tssb web --serial`) holds a board's serial port, no other program
can open it. The bridge therefore serves a Unix socket in its home, and `tssb info`,
`config`, `status --board`, `reboot` send their request through it to the board it holds.
One connection carries one request, both ways one JSON line:

  request  {"req": REQ, "port": PORT or null, "timeout": seconds}
           REQ is ["status"] | ["cfg_get", KEY] | ["cfg_set", KEY, VALUE] |
                  ["cmd", OP, ARG...]   (the board's link requests: tinyssb.link)
  answer   {"ok": VALUE, "port": P}     the board's REPLY or STATUS
           {"refused": REASON, "port": P}  the board's ERROR
           {"fail": WHY, "port": P}     no board connected, no answer in time, bad request
           {"other": P}                 the client named another PORT than the bridge's

The socket is `<home>/bridge.sock`, or one in the temporary directory named after the
home when that path is too long for a Unix socket; it is made readable by its owner only.
"""
import asyncio
import hashlib
import json
import logging
import os
import socket
import tempfile

from tinyssb import link

from tssb.safeparse import InputError, json_loads, one_line

log = logging.getLogger("tssb.bridge")

SOCKET_NAME = "bridge.sock"
MAX_PATH = 100           # sun_path holds 108 bytes on Linux, 104 on the BSDs
MAX_LINE = 8192          # a request or answer: one link body (1 KB) with JSON around it
MAX_DEPTH = 8            # a request: a list of a request's arguments (a settings object)
CONNECT_S = 1.0
MARGIN_S = 2.0           # the client waits this much longer than the board's timeout

# Request kinds -> function(rid, *args) making the link frame.
REQUESTS = {
    "status": lambda rid: link.status_request(rid),
    "cfg_get": lambda rid, key="": link.config_get(rid, key),
    "cfg_set": lambda rid, key, value: link.config_set(rid, key, value),
    "cmd": lambda rid, op, *args: link.command(rid, op, *args),
}


def frame_maker(req):
    """function(rid) -> link frame for a request list (see the module's docstring).

    Raises:
        ValueError: not a request this module knows.
    """
    if not isinstance(req, list) or not req or req[0] not in REQUESTS:
        raise ValueError("bad request %r" % (req,))
    make, args = REQUESTS[req[0]], req[1:]
    try:
        make(0, *args)        # the arguments are checked by making the frame once
    except Exception as e:    # noqa: BLE001 (arguments of any type: LinkError, TypeError,
        # AttributeError, ...)
        raise ValueError("bad arguments of %s: %s" % (req[0], one_line(e)))
    return lambda rid: make(rid, *args)


def socket_path(home):
    """Where the bridge of `home` listens."""
    path = os.path.join(home, SOCKET_NAME)
    if len(path.encode()) <= MAX_PATH:
        return path
    digest = hashlib.sha256(os.path.realpath(home).encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), "tssb-%d-%s.sock" % (os.getuid(), digest))


def _same_port(a, b):
    return os.path.realpath(a) == os.path.realpath(b)


class ControlServer:
    """Serves board requests for the bridge's board port (runner.attach_board)."""

    def __init__(self, board_port, serial_link):
        self.board_port = board_port
        self.serial_link = serial_link
        self.path = None
        self._server = None
        self.served = 0

    async def start(self, home):
        """Listen on the home's socket. Returns False (and logs why) when another
        bridge already serves this home."""
        path = socket_path(home)
        if os.path.exists(path):
            if _answers(path):
                log.warning("another bridge serves %s: this one takes no board requests",
                            path)
                return False
            os.unlink(path)        # left by a bridge that was killed
        old = os.umask(0o077)
        try:
            self._server = await asyncio.start_unix_server(self._handle, path,
                                                           limit=MAX_LINE)
        finally:
            os.umask(old)
        self.path = path
        return True

    async def close(self):
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        if self.path is not None:
            try:
                os.unlink(self.path)
            except OSError:
                pass
            self.path = None

    async def _handle(self, reader, writer):
        try:
            line = await asyncio.wait_for(reader.readline(), CONNECT_S)
            answer = await self.answer(line)
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()
        except (OSError, ValueError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            pass                   # the client went away or never spoke
        finally:
            writer.close()

    async def answer(self, line):
        """The answer dict for one request line."""
        sl = self.serial_link
        port = sl.port
        try:
            msg = json_loads(line, MAX_LINE, MAX_DEPTH, "request")
            if not isinstance(msg, dict):
                raise ValueError("not an object")
            make = frame_maker(msg.get("req"))
            timeout = msg.get("timeout", 3.0)
            wanted = msg.get("port")
            if type(timeout) not in (int, float) or not timeout >= 0:
                raise ValueError("timeout must be a number of seconds")
            if wanted is not None and not isinstance(wanted, str):
                raise ValueError("port must be text or null")
        except ValueError as e:
            return {"fail": "bad request: %s" % one_line(e), "port": port}
        if wanted and port and not _same_port(wanted, port):
            return {"other": port}
        if not sl.connected:
            return {"fail": "the bridge has no board connected (waiting for it%s)" %
                    (" on %s" % port if port else ""), "port": port}
        self.served += 1
        try:
            value = await self.board_port.request(make, min(max(timeout, 0.1), 30.0))
        except asyncio.TimeoutError:
            return {"fail": "the board on %s did not answer within %g s" % (port, timeout),
                    "port": port}
        except RuntimeError as e:
            return {"refused": str(e), "port": port}
        return {"ok": value, "port": port}


def _answers(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(CONNECT_S)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def request(home, req, port=None, timeout=3.0):
    """Ask the bridge running in `home` to pass `req` to its board.

    Returns:
        the answer dict, or None when no bridge serves that home.
    Raises:
        OSError: the bridge accepted but did not answer (broken connection).
    """
    path = socket_path(home)
    if not os.path.exists(path):
        return None
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(CONNECT_S)
    try:
        try:
            s.connect(path)
        except OSError:            # a socket left by a bridge that was killed
            return None
        s.settimeout(timeout + MARGIN_S)
        s.sendall(json.dumps({"req": req, "port": port, "timeout": timeout}).encode()
                  + b"\n")
        data = b""
        while not data.endswith(b"\n") and len(data) < MAX_LINE:
            chunk = s.recv(MAX_LINE)
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    try:
        answer = json_loads(data, MAX_LINE, what="answer")
    except InputError:
        raise OSError("the bridge at %s gave no answer" % path)
    if not isinstance(answer, dict):
        raise OSError("the bridge at %s gave no answer" % path)
    return answer
