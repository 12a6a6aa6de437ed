"""What a host can send a board over USB: every malformed request gets an error reply, the
host task keeps running, and a flood leaves bounded queues.

Runs under the MicroPython unix port and under CPython (test_fw_commands.py launches both):
    micropython tests/firmware/e2e_commands.py WORKDIR
from the repository root. The firmware boots over the fake radio and machine modules with
its real SerialBridge on an in-memory console and runs its real asyncio tasks; the host's
bytes are link frames as `tssb` sends them. Prints one line `E2E {json}` and exits 0 when
every check held.
"""
import sys

sys.path[:0] = ["shared", "firmware", "boards", "tests/firmware/fakes"]

import asyncio
import json

import lora
import machine
from tinyssb import link
from tssbfw import app, config
from tssbfw.bridge import MAX_CMDS, READ_CHUNK, SerialBridge
from tssbfw.clock import Clock

SCALE = 20
FLOOD_POLLS = 3000        # the figure: 74,999 queued commands after this many polls
STATUS_FRAME = link.status_request(1)

# (request frame, what the answer must be): "error" or "reply"
MALFORMED = [
    (link.config_set(1, "board", 5), "error"),
    (link.config_set(2, "plan", [1]), "error"),
    (link.config_set(3, "name", {"x": 1}), "error"),
    (link.config_set(4, "capacity", True), "error"),
    (link.config_set(5, "ble_name", 7), "error"),
    (link.config_set(6, "sf", 9.5), "error"),
    (link.config_get(7, "nosuchkey"), "error"),
    (link.command(8, "bogus"), "error"),
    (link.command(9, "config_set_many", "not a dict"), "error"),
    (link.command(10, "config_set_many", {"sf": 9, "power": 99}), "error"),
    (link.command(11, "info", 1, 2), "error"),
    (link.command(12, "status"), "error"),          # not a CMD: STATUS has its own type
    (link.config_set(13, "sf", 9), "reply"),
    (link.command(14, "info"), "reply"),
    (link.status_request(15), "status"),
]


class Console:
    """The board's end of the USB serial console: reads what the host wrote."""

    def __init__(self):
        self.inbox = bytearray()
        self.out = bytearray()

    def read(self, n):
        if not self.inbox:
            return None
        data = bytes(self.inbox[:n])
        self.inbox = self.inbox[n:]
        return data

    def write(self, data):
        self.out.extend(data)


def boot(work, console):
    root = work + "/node"
    config.save(root, {"plan": "EU868.a", "board": "heltec-v3", "name": "cmd1", "ble": False})
    br = SerialBridge(console.read, console.write, "cmd1")
    fw, _ = app.boot(root, lora_mod=lora, machine_mod=machine, bridge=br,
                     clock=Clock(scale=SCALE), urandom=lambda n: b"\x03" * n)
    br.attach(fw)
    return fw, br


def answers(out):
    got = {}
    for m in link.Decoder().feed(bytes(out)):
        if m[0] in ("reply", "error", "status"):
            got[m[1]] = m[0]
    return got


def malformed(work):
    console = Console()
    fw, br = boot(work, console)
    for frame, _ in MALFORMED:
        console.inbox.extend(frame)
    asyncio.run(fw.run(2000))
    got = answers(console.out)
    want = {}
    for i in range(len(MALFORMED)):
        want[i + 1] = MALFORMED[i][1]
    cfg, _ = config.load(fw.root)
    return {"answers_ok": got == want, "got": got, "board_kept": cfg["board"] == "heltec-v3",
            "sf_saved": cfg["sf"] == 9, "power_kept": cfg["power"] is None}


def flood(work):
    console = Console()
    fw, br = boot(work + "/flood", console)
    most = 0
    handed = 0
    for _ in range(FLOOD_POLLS):
        while len(console.inbox) < READ_CHUNK:          # the host never stops sending
            console.inbox.extend(STATUS_FRAME)
        cmds = br.poll()
        handed += len(cmds)
        for c in cmds:
            br.reply(c, fw.command(c))
        most = max(most, len(br._pending))
        console.out = bytearray()                         # the host reads the answers
    # a TX flood: host packets reach the node at most MAX_CMDS a poll
    console.inbox = bytearray()
    while br.poll():
        pass
    for i in range(40):
        console.inbox.extend(link.tx(bytes([i + 1]) * 40))
    first = br.counters["host_pkts"]
    br.poll()
    per_poll = br.counters["host_pkts"] - first
    return {"most_pending": most, "handed": handed, "per_poll": per_poll,
            "bound": MAX_CMDS + READ_CHUNK // len(STATUS_FRAME), "max_cmds": MAX_CMDS}


def main(work):
    res = malformed(work)
    res.update(flood(work))
    print("E2E " + json.dumps(res))
    ok = (res["answers_ok"] and res["board_kept"] and res["sf_saved"] and res["power_kept"]
          and res["most_pending"] <= res["bound"] and res["handed"] == FLOOD_POLLS * MAX_CMDS
          and res["per_poll"] == MAX_CMDS)
    sys.exit(0 if ok else 1)


if len(sys.argv) < 2:
    print("usage: e2e_commands.py WORKDIR")
    sys.exit(2)
main(sys.argv[1])
