"""tinySSB firmware for ESP32 LoRa boards (MicroPython; also imports on CPython).

Modules:
  clock      monotonic millisecond clock over MicroPython's wrapping ticks_ms
  airtime    LoRa time on air (Semtech formula)
  regions    radio plans of the deployed tinySSB nodes, with each region's legal limits
  limiter    transmit limiter: duty cycle (sliding hour) and dwell time; returns waits
  scheduler  send queue: bounded, duplicate-suppressing, random jitter, limiter-gated
  flashstore crash-safe append-only feed store over files (os/open only)
  radio      adapter over micropython-lib's `lora` drivers: packet || CRC32 on air
  power      board power rails (AXP192 LDO2 on the T-Beam, Vext on Heltec boards)
  config     config file and node identity (created on first boot)
  events     event log lines in the shared JSONL schema
  bridge     adapter point for the USB serial bridge (framing defined elsewhere)
  corelink   the one module that couples the firmware to the protocol core's Node
  app        the asyncio firmware: boot, radio rx/tx loops, node ticks, watchdog

Every time-dependent class takes `now_ms` as an argument, so the host's LoRa simulator
drives airtime, regions, limiter and scheduler with a virtual clock.
"""

VERSION = "0.1.0"
