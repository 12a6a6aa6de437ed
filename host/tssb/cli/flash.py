"""`tssb flash`: write a MicroPython image onto a board with esptool."""
import os
import sys

from tssb.cli import EXIT_FAILURE, CliError
from tssb.flash import FlashError, esptool_run, ports


def register(subparsers):
    p = subparsers.add_parser(
        "flash", help="write a MicroPython firmware image onto an ESP32 LoRa board (esptool)",
        description="Erase the board's flash and write a MicroPython image at the right "
                    "offset (0x1000 on ESP32 boards, 0x0 on ESP32-S3 boards). Use an image "
                    "built with tools/build_image.sh (frozen tinySSB firmware) or a stock "
                    "MicroPython image from micropython.org followed by `tssb deploy`. "
                    "Put the board in download mode if it does not enter it by itself: hold "
                    "BOOT, tap RESET, release BOOT.")
    p.add_argument("--board", required=False, metavar="BOARD",
                   help="board, optionally with its radio (e.g. tbeam:sx1262); one of: "
                        + ports.board_names())
    p.add_argument("--port", metavar="PORT",
                   help="serial port (default: the one USB port matching the board)")
    p.add_argument("--image", metavar="FILE",
                   help="firmware image (default: build/image/<MICROPYTHON_BOARD>/firmware.bin "
                        "from tools/build_image.sh)")
    p.add_argument("--baud", type=int, default=esptool_run.DEFAULT_BAUD,
                   help="serial speed for writing (default %(default)s; 115200 if writing "
                        "stops part way)")
    p.add_argument("--no-erase", action="store_true",
                   help="write without erasing the whole flash first (keeps the filesystem: "
                        "the board's tinySSB identity, feeds and config)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the esptool command line and do nothing")
    p.add_argument("--list", action="store_true",
                   help="list serial ports with the boards their USB ids hint at, and exit")
    p.set_defaults(func=run)


def default_image(board):
    from tssb.flash.bundle import BundleError, repo_root
    try:
        root = repo_root()
    except BundleError:
        root = os.getcwd()
    return os.path.join(root, "build", "image", board["micropython_board"], "firmware.bin")


def list_ports(list_fn=None):
    import tssb_boards
    rows = (list_fn or ports.list_ports)()
    if not rows:
        print("no serial ports")
    for dev, vid, pid, desc in rows:
        hint = ""
        if vid is not None:
            hint = "%04x:%04x %s" % (vid, pid, ",".join(tssb_boards.by_usb(vid, pid)) or "-")
        print("%-20s %-40s %s" % (dev, desc, hint))
    return 0


# ESP-IDF image header (esptool's esp_image_header_t): magic 0xE9 at byte 0, the chip id
# (uint16, little-endian) at byte 12 of the extended header. MicroPython's firmware.bin
# starts with the bootloader image, which carries both.
IMAGE_MAGIC = 0xE9
CHIP_ID_AT = 12
CHIP_IDS = {"esp32": 0x0000, "esp32s2": 0x0002, "esp32c3": 0x0005, "esp32s3": 0x0009}
CHIP_NAMES = {0x0000: "ESP32", 0x0002: "ESP32-S2", 0x0005: "ESP32-C3", 0x0009: "ESP32-S3"}


def check_image(path, board):
    """Raise CliError unless `path` looks like a firmware image for the board's chip."""
    try:
        with open(path, "rb") as f:
            head = f.read(CHIP_ID_AT + 2)
    except OSError as e:
        raise CliError("cannot read %s: %s" % (path, e.strerror or e), EXIT_FAILURE)
    if len(head) < CHIP_ID_AT + 2 or head[0] != IMAGE_MAGIC:
        raise CliError("%s is not an ESP32 firmware image (no 0x%02X image header): use the "
                       "firmware.bin of tools/build_image.sh or of micropython.org"
                       % (path, IMAGE_MAGIC), EXIT_FAILURE)
    chip = int.from_bytes(head[CHIP_ID_AT:CHIP_ID_AT + 2], "little")
    want = CHIP_IDS.get(board["mcu"])
    if want is not None and chip != want:
        raise CliError("%s is built for %s, but the %s is an %s: use an image for %s"
                       % (path, CHIP_NAMES.get(chip, "chip id %d" % chip), board["title"],
                          CHIP_NAMES[want], board["micropython_board"]), EXIT_FAILURE)


def run(args, main=None, list_fn=None):
    import tssb_boards
    if args.list:
        return list_ports(list_fn)
    if not args.board:
        raise CliError("--board is required (one of %s)" % ", ".join(tssb_boards.names()))
    try:
        board = tssb_boards.get(args.board)
    except ValueError as e:
        raise CliError(str(e))
    image = args.image or default_image(board)
    if not os.path.isfile(image):
        raise CliError("no firmware image at %s: build one with tools/build_image.sh or "
                       "download MicroPython for %s and pass --image FILE"
                       % (image, board["micropython_board"]), EXIT_FAILURE)
    check_image(image, board)
    try:
        if args.dry_run:
            port = args.port or "PORT"
        else:
            port = ports.choose(board, args.port, list_fn() if list_fn else None)
        cmd = esptool_run.write_args(board, port, image, args.baud, erase=not args.no_erase)
        if not args.no_erase:
            print("note: erasing the whole flash also erases the board's tinySSB identity "
                  "(its feed key), its stored feeds and its config: it starts over as a new "
                  "node; --no-erase keeps them", file=sys.stderr)
        print("esptool " + " ".join(cmd))
        if args.dry_run:
            return 0
        esptool_run.run(cmd, board, port, main)
    except FlashError as e:
        raise CliError(str(e), EXIT_FAILURE)
    print("flashed %s onto the %s on %s" % (os.path.basename(image), board["title"], port))
    return 0
