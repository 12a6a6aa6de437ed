# MicroPython manifest: freeze the tinySSB core, firmware and board definitions into an
# ESP32 image, with micropython-lib's LoRa drivers (both chip families, async API).
# Used by tools/build_image.sh:  make BOARD=... FROZEN_MANIFEST=<this file>
# Paths are relative to this file's folder (the manifest's base).
include("$(PORT_DIR)/boards/manifest.py")

package("tinyssb", base_path="../shared")
package("tssbfw", base_path=".")
package("tssb_boards", base_path="../boards")

require("lora")
require("lora-sx126x")
require("lora-sx127x")
require("lora-async")
require("lora-sync")
