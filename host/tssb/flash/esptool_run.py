"""esptool command lines for flashing a MicroPython image, run through `esptool.main`.

One esptool run writes the image at the board's offset (0x1000 on the ESP32, 0x0 on the
ESP32-S3) after erasing the whole flash (`write-flash --erase-all`), so a stale
filesystem never outlives a new image. esptool prints its own progress bar.
"""
from tssb.flash import FlashError
from tssb.flash.ports import PERMISSION_HINT

DEFAULT_BAUD = 460800  # MicroPython's deploy.md; retry without it when writing fails


def write_args(board, port, image, baud=DEFAULT_BAUD, erase=True):
    """The esptool v5 argument list that flashes `image` onto `board` at `port`."""
    args = ["--chip", board["mcu"], "--port", port, "--baud", str(baud),
            "--before", "default-reset", "--after", "hard-reset", "write-flash"]
    if erase:
        args.append("--erase-all")
    args += ["0x%x" % board["flash_offset"], image]
    return args


def explain(error, board, port):
    """A one-line user message for an esptool/pyserial failure."""
    msg = str(error)
    low = msg.lower()
    if "permission denied" in low or "errno 13" in low:
        return "no permission to open %s: %s" % (port, PERMISSION_HINT)
    if "wrong boot mode" in low or "failed to connect" in low or "no serial data" in low:
        return ("the board on %s is not in boot (download) mode: hold BOOT, press and "
                "release RESET/EN, release BOOT, then run the command again" % port)
    if "wrong chip argument" in low or "this chip is" in low:
        found = msg.split("This chip is", 1)[-1].split(",")[0].strip() if "This chip is" in msg \
            else "another chip"
        return ("wrong chip: the board on %s is an %s, but --board %s is an %s; "
                "pick the matching --board" % (port, found, board["name"], board["mcu"].upper()))
    if "could not open" in low or "errno 2" in low or "busy" in low:
        return ("cannot open %s: it is missing or in use (close serial monitors, mpremote, "
                "`tssb bridge`)" % port)
    if "timed out" in low or "packet content transfer stopped" in low:
        return "writing stopped part way on %s: try again with a lower --baud (115200)" % port
    return "esptool failed: %s" % msg.strip().splitlines()[0] if msg.strip() else \
        "esptool failed"


def run(args, board, port, main=None):
    """Run esptool with `args`; map its failures to FlashError."""
    if main is None:
        import esptool
        main = esptool.main
    try:
        import serial
        serial_error = serial.SerialException
    except ImportError:  # pragma: no cover
        serial_error = OSError
    try:
        from esptool.util import FatalError
    except ImportError:  # pragma: no cover
        FatalError = RuntimeError
    try:
        main(args)
    except (FatalError, serial_error, OSError) as e:
        raise FlashError(explain(e, board, port))
    except SystemExit as e:
        if e.code not in (0, None):
            raise FlashError("esptool rejected the arguments (exit %s)" % e.code)
