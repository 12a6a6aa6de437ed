#!/usr/bin/env bash
# Build an ESP32 MicroPython image with the tinySSB firmware frozen in.
#
# Needs ESP-IDF installed and exported (". $IDF_PATH/export.sh"); tested versions:
#   MicroPython v1.28.0 with ESP-IDF v5.5.1 (also v5.3, v5.4.x), see docs/firmware.md.
# Usage: tools/build_image.sh BOARD [MICROPYTHON_DIR]
#   BOARD            a tssb board name (heltec-v3, heltec-v2, tbeam, lora32-v21, t3s3)
#   MICROPYTHON_DIR  a micropython checkout (default: build/micropython, cloned at
#                    $MICROPYTHON_REF, default v1.28.0)
# Output: build/image/<MICROPYTHON_BOARD>/firmware.bin (what `tssb flash` writes by default)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BOARD="${1:?usage: tools/build_image.sh BOARD [MICROPYTHON_DIR]}"
MPDIR="${2:-$REPO/build/micropython}"
MICROPYTHON_REF="${MICROPYTHON_REF:-v1.28.0}"
PY="${PYTHON:-$REPO/.venv/bin/python}"
[ -x "$PY" ] || PY=python3

MPBOARD="$("$PY" -c "import sys; sys.path[:0]=['$REPO/boards']; import tssb_boards; \
print(tssb_boards.get(sys.argv[1])['micropython_board'])" "$BOARD")"

if ! command -v idf.py >/dev/null 2>&1; then
    echo "build_image: ESP-IDF not found: install it and run '. \$IDF_PATH/export.sh'" >&2
    echo "             (MicroPython $MICROPYTHON_REF wants ESP-IDF v5.5.1)" >&2
    exit 2
fi

if [ ! -d "$MPDIR/ports/esp32" ]; then
    git clone --depth 1 --branch "$MICROPYTHON_REF" https://github.com/micropython/micropython "$MPDIR"
fi

make -C "$MPDIR/mpy-cross"
make -C "$MPDIR/ports/esp32" BOARD="$MPBOARD" submodules
make -C "$MPDIR/ports/esp32" BOARD="$MPBOARD" FROZEN_MANIFEST="$REPO/firmware/manifest.py"

OUT="$REPO/build/image/$MPBOARD"
mkdir -p "$OUT"
cp "$MPDIR/ports/esp32/build-$MPBOARD/firmware.bin" "$OUT/firmware.bin"
echo "image: $OUT/firmware.bin  (flash with: tssb flash --board $BOARD --port PORT)"
