"""mpremote command lines for deploying the .mpy bundle onto a stock MicroPython board,
run as `python -m mpremote ...` (one invocation, commands chained with `+`).

Order: connect; clear old copies of our packages from /lib (a stale .py would shadow the
new .mpy); copy the packages into /lib; copy boot.py/main.py and the config; install the
radio driver packages with mip (host needs internet); reset.
"""
import subprocess
import sys

from tssb.flash import FlashError

PKGS = ("tinyssb", "tssbfw", "tssb_boards")


def prepare_script(root=""):
    """Python run on the board: make /lib and /tssb, remove old package folders.

    `root` prefixes the paths (tests run it on the unix port inside a temp folder).
    """
    return (
        "import os\n"
        "R=%r\n"
        "def _rm(p):\n"
        " try:\n"
        "  for e in os.ilistdir(p):\n"
        "   q=p+'/'+e[0]\n"
        "   _rm(q) if e[1]==0x4000 else os.remove(q)\n"
        "  os.rmdir(p)\n"
        " except OSError:\n"
        "  pass\n"
        "for d in ('/lib','/tssb'):\n"
        " try:\n"
        "  os.mkdir(R+d)\n"
        " except OSError:\n"
        "  pass\n"
        "for p in %r:\n"
        " _rm(R+'/lib/'+p)\n" % (root, PKGS))


PREPARE = prepare_script()


def driver_packages(board):
    """micropython-lib packages for the board's radio: chip driver plus lora-async."""
    from tssb_boards import family
    return ["lora-" + family(board["radio"]), "lora-async"]


def deploy_args(port, bundle_dir, config_file, board, mip=True):
    """The mpremote argument list (without the program name)."""
    args = ["connect", port, "exec", PREPARE]
    args += ["+", "fs", "cp", "-r"] + ["%s/%s" % (bundle_dir, p) for p in PKGS] + [":lib"]
    args += ["+", "fs", "cp", "%s/boot.py" % bundle_dir, ":boot.py"]
    args += ["+", "fs", "cp", "%s/main.py" % bundle_dir, ":main.py"]
    args += ["+", "fs", "cp", config_file, ":tssb/config.json"]
    if mip:
        args += ["+", "mip", "install"] + driver_packages(board)
    args += ["+", "reset"]
    return args


def explain(stderr, port):
    """A one-line user message for an mpremote failure (its stderr)."""
    low = stderr.lower()
    if "permission denied" in low:
        from tssb.flash.ports import PERMISSION_HINT
        return "no permission to open %s: %s" % (port, PERMISSION_HINT)
    if "failed to access" in low or "could not enter raw repl" in low:
        return ("cannot talk to MicroPython on %s: is MicroPython flashed (tssb flash) and "
                "no other program using the port?" % port)
    if "no device found" in low:
        return "no MicroPython device found on %s" % port
    if "mip" in low and ("error" in low or "failed" in low):
        return ("installing the LoRa drivers with mip failed (the host needs internet); "
                "retry or use --no-mip and install them later")
    last = [l for l in stderr.strip().splitlines() if l.strip()]
    return "mpremote failed: %s" % (last[-1] if last else "unknown error")


def run(args, port, runner=None):
    """Run mpremote with `args` (output streams through); map failures to FlashError."""
    runner = runner or subprocess.run
    cmd = [sys.executable, "-m", "mpremote"] + args
    r = runner(cmd, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise FlashError(explain(r.stderr or "", port))
    return r
