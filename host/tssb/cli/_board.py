"""A board for one request (status, info, config, reboot): ask it, answer.

The request goes through the `tssb bridge` running in this home when one holds the board
(its control socket, tssb.bridge.control), else straight to the port: found, opened,
asked, closed. Unlike `tssb bridge`, which keeps a board attached and reconnects, these
fail at once when neither is there or the board is silent, each with one line saying
what to check.
"""
import asyncio
import time

from tssb.cli import EXIT_FAILURE, CliError, home_path, run_async

CONNECT_S = 2.0   # the port opened at once in check_port: give the reader thread this long
REPLY_S = 3.0     # a running firmware answers within one host-loop turn (IDLE_MS 50 ms)
PROMPT_S = 10.0   # a board resets and boots to its REPL in a few seconds


def check_port(port, baud=115200):
    """Fail at once (CliError) when the port cannot be opened."""
    import serial
    from tssb.bridge.serial_link import PortBusy, open_no_reset
    try:
        open_no_reset(port, baud).close()
    except PortBusy as e:
        raise CliError(str(e), EXIT_FAILURE)
    except (serial.SerialException, OSError) as e:
        why = getattr(e, "strerror", None) or str(e)
        if "lock" in why.lower():
            raise CliError("serial port %s is held by another program (a `tssb bridge` of "
                           "another home, mpremote, a terminal?): stop it, or use its home "
                           "with --home" % port, EXIT_FAILURE)
        raise CliError("cannot open serial port %s: %s (see `tssb bridge --list`)"
                       % (port, why), EXIT_FAILURE)


def choose_port(port, home=None):
    """The port to use: `port` (checked), else the single auto-detected board."""
    from tssb.bridge import ports
    try:
        name = ports.choose(port)
    except ports.PortChoiceError as e:
        raise CliError("%s%s" % (e, "; and no `tssb bridge` runs in %s" % home
                                 if home else ""), EXIT_FAILURE)
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
                       "running? (`tssb deploy` installs it; after `tssb reboot --repl` it "
                       "is off until the next reset)" % (port_name, timeout), EXIT_FAILURE)
    except RuntimeError as e:   # the board's ERROR reply
        raise CliError("the board refused: %s" % e, EXIT_FAILURE)
    finally:
        sl.stop()


def ask(args, req, timeout=REPLY_S):
    """The board's answer to one request, e.g. ["status"], ["cfg_get", "plan"],
    ["cmd", "info"] (tssb.bridge.control.REQUESTS).

    `args.port` names the port (else auto-detection); a `tssb bridge` running in the
    home (`args.home`) that holds that port is asked instead of the port.
    """
    from tssb.bridge import control
    home = home_path(args)
    try:
        ans = control.request(home, req, args.port, timeout)
    except OSError as e:
        raise CliError("the `tssb bridge` of %s did not answer: %s" % (home, e),
                       EXIT_FAILURE)
    if ans is not None and "other" not in ans:
        if "ok" in ans:
            return ans["ok"]
        if "refused" in ans:
            raise CliError("the board refused: %s" % ans["refused"], EXIT_FAILURE)
        raise CliError("through the running `tssb bridge`: %s" % ans.get("fail"),
                       EXIT_FAILURE)
    port = choose_port(args.port, home)
    return run_async(_request(port, control.frame_maker(req), timeout))


def hand_console_to_repl(port, reply_s=1.5):
    """When the tinySSB firmware runs on `port`, restart the board into the MicroPython
    REPL (as `tssb reboot --repl` does) and wait for its prompt: the firmware ignores
    Ctrl-C, so mpremote could not interrupt it.

    Returns:
        True when it did so; False when no firmware answered (the board is at its REPL
        already, or the port cannot be opened: mpremote then says why).
    """
    import serial
    from tinyssb import link
    from tssb.bridge.serial_link import open_no_reset
    try:
        s = open_no_reset(port)
    except (serial.SerialException, OSError):
        return False
    try:
        s.write(link.command(1, "repl"))
        dec = link.Decoder()
        end = time.monotonic() + reply_s
        while not any(m[0] == "reply" and m[1] == 1 for m in dec.feed(s.read(256))):
            if time.monotonic() > end:
                return False
        seen = b""
        end = time.monotonic() + PROMPT_S
        while b">>> " not in seen and time.monotonic() < end:
            seen = (seen + s.read(256))[-64:]
        return True
    except (serial.SerialException, OSError):
        return False
    finally:
        s.close()
