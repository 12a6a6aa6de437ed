"""A board on USB for one request (status, config): find the port, open it, ask, answer.

`tssb bridge` keeps a board attached and reconnects; these commands instead fail at once
when the port is missing, busy or silent, each with one line saying what to check.
"""
import asyncio

from tinyssb import link
from tssb.cli import EXIT_FAILURE, CliError, run_async

CONNECT_S = 2.0   # the port opened at once in check_port: give the reader thread this long
REPLY_S = 3.0     # a running firmware answers within one host-loop turn (IDLE_MS 50 ms)


def check_port(port, baud=115200):
    """Fail at once (CliError) when the port cannot be opened."""
    import serial
    from tssb.bridge.serial_link import PortBusy, open_no_reset
    try:
        open_no_reset(port, baud).close()
    except PortBusy as e:
        raise CliError(str(e), EXIT_FAILURE)
    except (serial.SerialException, OSError) as e:
        raise CliError("cannot open serial port %s: %s (see `tssb bridge --list`)"
                       % (port, getattr(e, "strerror", None) or e), EXIT_FAILURE)


def choose_port(port):
    """The port to use: `port` (checked), else the single auto-detected board."""
    from tssb.bridge import ports
    try:
        name = ports.choose(port)
    except ports.PortChoiceError as e:
        raise CliError(str(e), EXIT_FAILURE)
    check_port(name)
    return name


async def _request(port_name, make, timeout):
    from tssb.bridge.serial_link import BoardPort, SerialLink

    class _NoNode:
        def receive(self, *a):
            pass
    bp = BoardPort(_NoNode())
    sl = SerialLink(lambda: port_name, bp.on_message, loop=asyncio.get_running_loop())
    bp.link = sl
    sl.start()
    try:
        for _ in range(int(CONNECT_S / 0.05)):
            if sl.connected:
                break
            await asyncio.sleep(0.05)
        if not sl.connected:
            raise CliError("cannot open serial port %s (busy? `tssb bridge` may hold it)"
                           % port_name, EXIT_FAILURE)
        return await bp.request(make, timeout)
    except asyncio.TimeoutError:
        raise CliError("the board on %s did not answer within %g s: is the tinySSB firmware "
                       "running (`tssb deploy`), and no `tssb bridge` holding the port?"
                       % (port_name, timeout), EXIT_FAILURE)
    except RuntimeError as e:   # the board's ERROR reply
        raise CliError("the board refused: %s" % e, EXIT_FAILURE)
    finally:
        sl.stop()


def request(port_name, make, timeout=REPLY_S):
    """Send one request (make(rid) -> frame) to the board; returns its answer."""
    return run_async(_request(port_name, make, timeout))


def status(port_name):
    return request(port_name, link.status_request)
