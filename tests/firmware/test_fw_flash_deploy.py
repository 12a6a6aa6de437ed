"""tssb flash / tssb deploy: command lines accepted by esptool's and mpremote's own
parsers, failures mapped to clear messages (with fakes: no hardware), the .mpy bundle,
the frozen-image manifest and build script."""
import argparse
import json
import os
import subprocess
import sys
import types

import pytest

import tssb_boards
from tssb.cli import CliError
from tssb.flash import FlashError
from tssb.flash import bundle, esptool_run, mpremote_run, ports

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MPY = os.path.join(os.path.dirname(sys.executable), "micropython")


# -- esptool -------------------------------------------------------------------------------

def esptool_parse(args):
    """Parse `args` with esptool's own click command tree, without running anything."""
    import esptool
    esptool.cli._esp = None   # what esptool.main's call sets: no pre-connected device
    ctx = esptool.cli.make_context("esptool", list(args))
    prot = ctx._protected_args if hasattr(ctx, "_protected_args") else ctx.protected_args
    rest = list(prot) + ctx.args
    name, cmd, sub_args = esptool.cli.resolve_command(ctx, rest)
    sub = cmd.make_context(name, sub_args, parent=ctx)
    return name, ctx.params, sub.params


@pytest.mark.parametrize("name", tssb_boards.names())
def test_esptool_accepts_write_args(tmp_path, name):
    img = tmp_path / "fw.bin"
    img.write_bytes(b"\xe9" + b"\x00" * 4095)
    board = tssb_boards.get(name)
    cmd, top, sub = esptool_parse(esptool_run.write_args(board, "/dev/ttyUSB0", str(img)))
    assert cmd == "write-flash"
    assert top["chip"] == board["mcu"].replace("esp32s3", "esp32s3")
    assert top["port"] == "/dev/ttyUSB0" and top["baud"] == 460800
    assert sub["erase_all"] is True
    [(addr, f)] = sub["addr_filename"]
    assert addr == (0x1000 if board["mcu"] == "esp32" else 0)
    assert f.name == str(img)
    f.close()


def test_esptool_parser_rejects_bad_chip(tmp_path):
    import click
    img = tmp_path / "fw.bin"
    img.write_bytes(b"\x00" * 16)
    board = dict(tssb_boards.get("heltec-v3"), mcu="esp99")
    with pytest.raises(click.UsageError):
        esptool_parse(esptool_run.write_args(board, "/dev/ttyUSB0", str(img)))


FAILS = [
    ("Failed to connect to ESP32: Wrong boot mode detected (0x13)! The chip needs to be in "
     "download mode.", "not in boot (download) mode"),
    ("Failed to connect to ESP32: No serial data received.", "not in boot (download) mode"),
    ("This chip is ESP32-S3, not ESP32. Wrong chip argument?", "wrong chip: the board on "
     "/dev/ttyUSB0 is an ESP32-S3"),
    ("Could not open /dev/ttyUSB0, the port is busy or doesn't exist.\n([Errno 13] could not "
     "open port /dev/ttyUSB0: [Errno 13] Permission denied: '/dev/ttyUSB0')\nHint: Try to add "
     "user into dialout or uucp group.", "no permission to open /dev/ttyUSB0"),
    ("Could not open /dev/ttyUSB0, the port is busy or doesn't exist.\n([Errno 16] Device or "
     "resource busy)", "missing or in use"),
]


@pytest.mark.parametrize("message,expect", FAILS)
def test_esptool_failures_become_clear_messages(message, expect):
    from esptool.util import FatalError

    def fake_main(args):
        raise FatalError(message)
    with pytest.raises(FlashError) as e:
        esptool_run.run(["x"], tssb_boards.get("heltec-v2"), "/dev/ttyUSB0", fake_main)
    assert expect in str(e.value)


def test_serial_exception_permission():
    import serial

    def fake_main(args):
        raise serial.SerialException("[Errno 13] could not open port /dev/ttyACM0: "
                                     "[Errno 13] Permission denied: '/dev/ttyACM0'")
    with pytest.raises(FlashError, match="no permission to open /dev/ttyACM0.*dialout"):
        esptool_run.run(["x"], tssb_boards.get("t3s3"), "/dev/ttyACM0", fake_main)


# -- ports -----------------------------------------------------------------------------------

CP = (0x10C4, 0xEA60)


def test_port_choice_by_usb_hints(monkeypatch):
    monkeypatch.setattr(ports, "check_access", lambda p: None)
    b = tssb_boards.get("heltec-v3")
    listed = [("/dev/ttyS0", None, None, "n/a"), ("/dev/ttyUSB0", 0x1A86, 0x7523, "CH340"),
              ("/dev/ttyUSB1", CP[0], CP[1], "CP2102")]
    assert ports.choose(b, ports=listed) == "/dev/ttyUSB1"
    two = listed + [("/dev/ttyUSB2", CP[0], CP[1], "CP2102")]
    with pytest.raises(FlashError, match="several serial ports.*ttyUSB1.*ttyUSB2.*--port"):
        ports.choose(b, ports=two)
    with pytest.raises(FlashError, match="no USB serial port found"):
        ports.choose(b, ports=[("/dev/ttyS0", None, None, "n/a")])
    # no hint matches: any single USB serial port is taken
    assert ports.choose(b, ports=listed[:2]) == "/dev/ttyUSB0"


def test_port_permission_and_missing(tmp_path, monkeypatch):
    dev = tmp_path / "ttyUSB9"
    dev.write_bytes(b"")
    with pytest.raises(FlashError, match="does not exist"):
        ports.check_access(str(tmp_path / "nope"))
    monkeypatch.setattr(ports.os, "access", lambda p, m: False)
    with pytest.raises(FlashError, match="no permission to open .*dialout"):
        ports.check_access(str(dev))
    ports.check_access("rfc2217://host:4000")   # remote ports are left to the tool


# -- tssb flash ------------------------------------------------------------------------------

def flash_args(**kw):
    d = dict(board="heltec-v3", port=None, image=None, baud=460800, no_erase=False,
             dry_run=False, list=False)
    d.update(kw)
    return argparse.Namespace(**d)


def test_flash_runs_esptool_with_board_offset(tmp_path, monkeypatch, capsys):
    from tssb.cli import flash as cmd_flash
    img = tmp_path / "fw.bin"
    img.write_bytes(b"\xe9" + bytes(63))   # an ESP32 image header (chip id 0)
    monkeypatch.setattr(ports, "check_access", lambda p: None)
    seen = []
    rc = cmd_flash.run(flash_args(board="tbeam", port="/dev/ttyUSB3", image=str(img)),
                       main=seen.append)
    assert rc == 0
    assert seen[0][-3:] == ["--erase-all", "0x1000", str(img)]
    assert seen[0][:4] == ["--chip", "esp32", "--port", "/dev/ttyUSB3"]
    esptool_parse(seen[0])
    assert "flashed fw.bin" in capsys.readouterr().out


def test_flash_errors(tmp_path):
    from tssb.cli import flash as cmd_flash
    with pytest.raises(CliError, match="no firmware image"):
        cmd_flash.run(flash_args(image=str(tmp_path / "none.bin")))
    with pytest.raises(CliError, match="unknown board"):
        cmd_flash.run(flash_args(board="esp8266"))
    with pytest.raises(CliError, match="--board is required"):
        cmd_flash.run(flash_args(board=None))


def test_flash_list(capsys):
    from tssb.cli import flash as cmd_flash
    cmd_flash.run(flash_args(list=True), list_fn=lambda: [("/dev/ttyACM0", 0x303A, 0x1001,
                                                           "USB JTAG")])
    assert "303a:1001 t3s3" in capsys.readouterr().out


def test_flash_help_via_cli():
    r = subprocess.run([sys.executable, "-m", "tssb", "flash", "--help"], capture_output=True,
                       text=True)
    assert r.returncode == 0 and "boot" in r.stdout.lower() and "--image" in r.stdout


# -- mpremote ---------------------------------------------------------------------------------

def mpremote_parse(args):
    """Walk `args` the way mpremote's main() does, with its own parsers, running nothing."""
    from mpremote import main as mp
    mp.prepare_command_expansions(types.SimpleNamespace(commands={}))  # no user macros
    remaining = list(args)
    out = []
    while remaining:
        if remaining[0] == "+":
            remaining.pop(0)
            continue
        mp.do_command_expansion(remaining)
        cmd = remaining.pop(0)
        _, parser_func = mp._COMMANDS[cmd]
        try:
            t = remaining.index("+")
            cargs, extra = remaining[:t], remaining[t:]
        except ValueError:
            cargs, extra = remaining, []
        p = parser_func()
        p.add_argument("next_command", nargs=argparse.REMAINDER)
        ns = p.parse_args(cargs)
        out.append((cmd, ns))
        remaining = ns.next_command + extra
    return out


def test_mpremote_accepts_deploy_args():
    b = tssb_boards.get("tbeam:sx1262")
    args = mpremote_run.deploy_args("/dev/ttyUSB0", "/b", "/c/config.json", b)
    cmds = mpremote_parse(args)
    names = [c for c, _ in cmds]
    assert names == ["connect", "exec", "fs", "fs", "fs", "fs", "mip", "exec"]
    assert cmds[0][1].device == ["/dev/ttyUSB0"]
    cp = cmds[2][1]
    assert cp.command == ["cp"] and cp.recursive
    assert cp.path == ["/b/tinyssb", "/b/tssbfw", "/b/tssb_boards", ":lib"]
    assert [c[1].path for c in cmds[3:6]] == [["/b/boot.py", ":boot.py"],
                                             ["/b/main.py", ":main.py"],
                                             ["/c/config.json", ":tssb/config.json"]]
    assert cmds[6][1].command == ["install"]
    assert cmds[6][1].packages == ["lora-sx126x", "lora-async"]
    assert "machine.reset()" in cmds[7][1].expr[0]         # the `reset` shortcut


def test_mpremote_without_mip_and_driver_family():
    b = tssb_boards.get("heltec-v2")
    assert mpremote_run.driver_packages(b) == ["lora-sx127x", "lora-async"]
    names = [c for c, _ in mpremote_parse(mpremote_run.deploy_args("a0", "/b", "/c", b,
                                                                   mip=False))]
    assert "mip" not in names


@pytest.mark.skipif(not os.path.exists(MPY), reason="MicroPython unix port not installed")
def test_prepare_script_on_micropython(tmp_path):
    base = str(tmp_path)
    os.makedirs(base + "/lib/tssbfw/sub")
    open(base + "/lib/tssbfw/app.py", "w").close()
    open(base + "/lib/tssbfw/sub/x.mpy", "w").close()
    os.makedirs(base + "/lib/other")
    script = mpremote_run.prepare_script(base)
    r = subprocess.run([MPY, "-c", script], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert not os.path.exists(base + "/lib/tssbfw")
    assert os.path.isdir(base + "/lib/other") and os.path.isdir(base + "/tssb")


@pytest.mark.parametrize("stderr,expect", [
    ("mpremote: failed to access /dev/ttyACM0 (it may be in use by another program)",
     "cannot talk to MicroPython on /dev/ttyACM0"),
    ("could not open port /dev/ttyACM0: [Errno 13] Permission denied", "no permission"),
    ("mpremote: no device found", "no MicroPython device found"),
    ("Traceback...\nOSError: 28", "mpremote failed: OSError: 28"),
])
def test_mpremote_failures(stderr, expect):
    def runner(cmd, **kw):
        return types.SimpleNamespace(returncode=1, stderr=stderr)
    with pytest.raises(FlashError, match=expect):
        mpremote_run.run(["connect", "/dev/ttyACM0"], "/dev/ttyACM0", runner)


def test_deploy_builds_bundle_and_runs_mpremote(tmp_path, monkeypatch):
    from tssb.cli import deploy as cmd_deploy
    monkeypatch.setattr(ports, "check_access", lambda p: None)
    seen = {}

    def runner(cmd, **kw):
        seen["cmd"] = cmd
        cfg = [a for a in cmd if a.endswith("config.json")][0]
        with open(cfg) as f:
            seen["cfg"] = json.load(f)
        seen["mpy"] = sorted(os.listdir(os.path.join(os.path.dirname(cfg), "bundle",
                                                     "tssbfw")))
        return types.SimpleNamespace(returncode=0, stderr="")
    ns = argparse.Namespace(board="t3s3", port="/dev/ttyACM0", plan="EU868.b", name="n7",
                            no_mip=False, bundle_dir=None, dry_run=False, no_ble=False,
                            ble_name=None)
    assert cmd_deploy.run(ns, runner=runner) == 0
    assert seen["cmd"][:5] == [sys.executable, "-m", "mpremote", "connect", "/dev/ttyACM0"]
    assert seen["cfg"]["board"] == "t3s3" and seen["cfg"]["plan"] == "EU868.b"
    assert seen["cfg"]["name"] == "n7"
    assert seen["cfg"]["ble"] is True and seen["cfg"]["ble_name"] is None
    assert "flashstore.mpy" in seen["mpy"] and "app.mpy" in seen["mpy"]
    assert "ble.mpy" in seen["mpy"]
    mpremote_parse(seen["cmd"][3:])
    ns.no_ble, ns.ble_name = True, "tinySSB-garden"
    cmd_deploy.run(ns, runner=runner)
    assert seen["cfg"]["ble"] is False and seen["cfg"]["ble_name"] == "tinySSB-garden"
    ns.ble_name = "x" * 30
    with pytest.raises(CliError, match="ble_name"):
        cmd_deploy.run(ns, runner=runner)
    ns.ble_name = None
    ns.name = "bad name!"
    with pytest.raises(CliError, match="name"):
        cmd_deploy.run(ns, runner=runner)


# -- bundle, manifest, image script -----------------------------------------------------------

def test_bundle_is_xtensawin_mpy(tmp_path):
    info = bundle.build(str(tmp_path / "b"))
    mpys = [f for f, _ in info["files"] if f.endswith(".mpy")]
    assert {f.split(os.sep)[0] for f in mpys} == {"tinyssb", "tssbfw", "tssb_boards"}
    arch = {}
    for rel in mpys:
        with open(os.path.join(str(tmp_path / "b"), rel), "rb") as f:
            head = f.read(4)
        assert head[:2] == b"M\x06"                 # .mpy version 6
        arch[rel] = head[2] >> 2
    # plain bytecode carries no arch; modules with viper code are xtensawin (index 10)
    assert arch[os.path.join("tinyssb", "hotloops.mpy")] == 10
    assert set(arch.values()) <= {0, 10}
    assert 0 < info["mpy_bytes"] < info["py_bytes"]
    assert os.path.exists(str(tmp_path / "b" / "main.py"))


def test_manifest_freezes_existing_packages():
    calls = []
    env = {"include": lambda p: calls.append(("include", p)),
           "package": lambda name, files=None, base_path=".", opt=None:
               calls.append(("package", name, base_path)),
           "require": lambda name, **kw: calls.append(("require", name)),
           "freeze": lambda *a, **k: calls.append(("freeze",) + a),
           "module": lambda *a, **k: calls.append(("module",) + a)}
    path = os.path.join(ROOT, "firmware", "manifest.py")
    with open(path) as f:
        exec(compile(f.read(), path, "exec"), env)
    pkgs = [c for c in calls if c[0] == "package"]
    assert {c[1] for c in pkgs} == {"tinyssb", "tssbfw", "tssb_boards"}
    for _, name, base in pkgs:
        assert os.path.isfile(os.path.join(ROOT, "firmware", base, name, "__init__.py"))
    reqs = {c[1] for c in calls if c[0] == "require"}
    assert {"lora", "lora-sx126x", "lora-sx127x", "lora-async"} <= reqs
    assert calls[0] == ("include", "$(PORT_DIR)/boards/manifest.py")


def test_build_image_script_needs_esp_idf(tmp_path):
    script = os.path.join(ROOT, "tools", "build_image.sh")
    assert subprocess.run(["bash", "-n", script]).returncode == 0
    env = dict(os.environ, PATH="/usr/bin:/bin", PYTHON=sys.executable)
    r = subprocess.run(["bash", script, "heltec-v3", str(tmp_path / "mp")], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 2 and "ESP-IDF" in r.stderr
    r = subprocess.run(["bash", script, "nosuchboard", str(tmp_path / "mp")], env=env,
                       capture_output=True, text=True)
    assert r.returncode != 0 and "unknown board" in r.stderr


@pytest.mark.skipif(not os.path.exists(MPY), reason="MicroPython unix port not installed")
def test_e2e_from_compiled_bundle(tmp_path):
    # the same two-node run, importing the core and firmware from .mpy (native arch, so
    # the unix port can load it; viper code included)
    bundle.build(str(tmp_path / "b"), arch="x64")
    r = subprocess.run([MPY, "tests/firmware/e2e_two_nodes.py", str(tmp_path / "w"),
                        str(tmp_path / "b")], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads([l for l in r.stdout.splitlines() if l.startswith("E2E ")][0][4:])
    assert res["b_has"] == 3 and res["chain_ok"] and res["reboot_has"] == 3
