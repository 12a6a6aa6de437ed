"""Power-on of the virtual board, run by the MicroPython unix port (tssb.sim.vboard):

    micropython -X heapsize=N [-i] run.py OPTIONS_FILE

OPTIONS_FILE holds JSON: {"image": flash file, "blocks": its 4 KB blocks, "fw": folder with the
compiled firmware (tinyssb, tssbfw, tssb_boards, boot.py, main.py), "config": settings
to write into /tssb/config.json (what `tssb deploy` writes), "medium": [group, port,
interface] of the UDP air or null, "main": false to run boot.py only (a soft reset
from the raw REPL)}.

The board's flash becomes the root filesystem, as on the ESP32: /boot.py, /main.py and
/tssb/ live on it. The firmware's modules are not on it: a board built with
tools/build_image.sh has them frozen into its image, here they come from "/.tssbfw" (the
compiled bundle) and the board's `machine` and `lora` from "/.vboard" (this folder).
Then boot.py and main.py run as MicroPython's pyexec runs them; with -i the REPL follows
when main.py returns, as on a board.
"""
import json
import os
import sys

with open(sys.argv[1]) as f:
    opts = json.loads(f.read())
here = sys.path[0] or "."
import _thread        # noqa: E402
import machine        # noqa: E402  before the root changes: it reads /proc/self/stat
import vflash         # noqa: E402

_thread.start_new_thread(machine.watch_power, ())

flash = vflash.volume(opts["image"], opts["blocks"])
os.mount(os.VfsPosix(opts["fw"]), "/.tssbfw")
os.mount(os.VfsPosix(here), "/.vboard")
os.umount("/")
os.mount(flash, "/")
os.chdir("/")
sys.path[:] = ["", ".frozen", "/.tssbfw", "/.vboard", "/lib"]

import lora           # noqa: E402
from tssbfw import config   # noqa: E402

lora.MEDIUM = opts["medium"]


def _install(name):
    """Copy boot.py / main.py from the bundle when they differ (as deploy does)."""
    with open("/.tssbfw/" + name) as f:
        new = f.read()
    try:
        with open("/" + name) as f:
            if f.read() == new:
                return
    except OSError:
        pass
    with open("/" + name, "w") as f:
        f.write(new)


_install("boot.py")
_install("main.py")
cfg, _ = config.load("/tssb")
cfg.update(opts["config"])
config.save("/tssb", cfg)
main = opts.get("main", True)
del cfg, opts, flash, here, _install, json
exec(open("/boot.py").read(), {"__name__": "__main__"})
if main:
    exec(open("/main.py").read(), {"__name__": "__main__"})
