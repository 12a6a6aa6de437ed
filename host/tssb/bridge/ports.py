"""Finding the serial port of a tinySSB board by USB VID/PID (pyserial's port listing).

USB-serial chips are shared by many boards, so a VID/PID match says "probably a board",
not which board; when several ports match the user must choose (`--port`).
"""
import tssb_boards


class PortChoiceError(Exception):
    """No board port, or several: the message lists what was found."""


def board_hints():
    """{(vid, pid): chip description} over all supported boards."""
    out = {}
    for name in tssb_boards.names():
        for vid, pid, what in tssb_boards.BOARDS[name]["usb"]:
            out[(vid, pid)] = what
    return out


def list_ports():
    """[(device, vid, pid, description)] of the host's serial ports."""
    from serial.tools import list_ports as lp
    return [(p.device, p.vid, p.pid, p.description or "") for p in lp.comports()]


def candidates(ports=None):
    """Ports whose VID/PID is a known board bridge chip, with the boards it may be.

    Returns:
        [(device, description, [board names])], sorted by device.
    """
    ports = list_ports() if ports is None else ports
    hints = board_hints()
    out = []
    for dev, vid, pid, desc in ports:
        if vid is not None and (vid, pid) in hints:
            out.append((dev, desc or hints[(vid, pid)], tssb_boards.by_usb(vid, pid)))
    return sorted(out)


def choose(port=None, ports=None):
    """The port to use: `port` if given, else the single auto-detected board port.

    Raises:
        PortChoiceError: none found, or several (the message lists them).
    """
    if port:
        return port
    c = candidates(ports)
    if not c:
        raise PortChoiceError("no tinySSB board found on USB (known chips: %s); connect one "
                              "with a data cable or name the port with --port"
                              % ", ".join(sorted(set(board_hints().values()))))
    if len(c) > 1:
        raise PortChoiceError(
            "several boards found; choose one with --port:\n" +
            "\n".join("  %-20s %s (%s)" % (d, desc, ", ".join(b)) for d, desc, b in c))
    return c[0][0]
