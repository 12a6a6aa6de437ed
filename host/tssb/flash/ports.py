"""Choosing the serial port of a board, with clear errors for the common mistakes."""
import os

from tssb.flash import FlashError

PERMISSION_HINT = ("add your user to the serial group (Debian/Ubuntu: sudo usermod -aG dialout "
                   "$USER; Arch: uucp) and log in again")


def list_ports():
    """[(device, vid, pid, description)] of the host's serial ports."""
    from serial.tools import list_ports
    return [(p.device, p.vid, p.pid, p.description or "") for p in list_ports.comports()]


def choose(board, port=None, ports=None):
    """The port to use for `board` (a tssb_boards.get() dict).

    An explicit port is checked for existence and permission. Otherwise the board's USB
    hints pick among the USB serial ports; exactly one candidate is required.

    Raises:
        FlashError: no port, several candidates, missing port or no permission.
    """
    if port:
        check_access(port)
        return port
    ports = list_ports() if ports is None else ports
    usb = [p for p in ports if p[1] is not None]
    hints = set((h[0], h[1]) for h in board["usb"])
    cands = [p for p in usb if (p[1], p[2]) in hints] or usb
    if not cands:
        raise FlashError("no USB serial port found: connect the %s with a data cable "
                       "or name the port with --port" % board["title"])
    if len(cands) > 1:
        raise FlashError("several serial ports could be the %s: %s; choose one with --port"
                       % (board["title"], ", ".join("%s (%s)" % (p[0], p[3]) for p in cands)))
    check_access(cands[0][0])
    return cands[0][0]


def check_access(port):
    """Raise FlashError when `port` is a device path that is missing or not writable."""
    if "://" in port or not port.startswith("/"):
        return   # rfc2217://, socket:// and Windows COM ports: let the tool open them
    if not os.path.exists(port):
        raise FlashError("serial port %s does not exist (unplugged? see `tssb flash --list`)"
                       % port)
    if not os.access(port, os.R_OK | os.W_OK):
        raise FlashError("no permission to open %s: %s" % (port, PERMISSION_HINT))


def board_names():
    """Board names for --help texts ("see docs/boards.md" if the boards package is missing:
    a stale install must not break every other command)."""
    try:
        import tssb_boards
        return ", ".join(tssb_boards.names())
    except ImportError:
        return "see docs/boards.md"
