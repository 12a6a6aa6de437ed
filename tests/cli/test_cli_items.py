"""The smaller things a user meets, each as expected: exit statuses, peers and addresses,
reading by peer name, DAG commands, post progress, flashing checks, listen's lines, store
file names and paths, sync errors in words, and README's "sync two hosts" as written.
(A second bridge on a busy port: tests/bridge/test_bridge_home.py.)"""
import argparse
import json
import os
import re

import pytest

from conftest import spawn, tssb, two_homes, wait_stderr

HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(os.path.dirname(os.path.dirname(HERE)), "README.md")


@pytest.fixture
def pair(tmp_path):
    a, b, cb, server = two_homes(tmp_path)
    yield a, b, cb, server
    server.close()
    cb.close()


def test_failures_exit_1_usage_2(tmp_path, pair):
    a = pair[0]
    assert tssb("post", "--home", a, "one").code == 0
    r = tssb("cert", "make", "self", "9", "--home", a)
    assert r.code == 1 and "not stored here" in r.err, r
    r = tssb("dag", "post", "--home", a, "--root", "ab" * 20, "x")
    assert r.code == 1 and "no DAG with root" in r.err, r
    r = tssb("counter", "increment", "ab" * 20, "--home", a)
    assert r.code == 1 and "unknown counter" in r.err, r
    r = tssb("dag", "post", "--home", a, "--root", "xyz", "x")
    assert r.code == 2, r                         # a malformed argument stays a usage error
    from tssb.cli import flash as cmd_flash
    from tssb.flash import ports
    img = tmp_path / "fw.bin"
    img.write_bytes(b"\xe9" + bytes(63))

    def not_in_boot_mode(args):
        from esptool.util import FatalError
        raise FatalError("Failed to connect to ESP32: Wrong boot mode detected (0x13)!")
    args = argparse.Namespace(board="tbeam", port="/dev/ttyUSB3", image=str(img), baud=460800,
                              no_erase=False, dry_run=False, list=False, home=None)
    orig = ports.check_access
    ports.check_access = lambda p: None
    try:
        from tssb.cli import CliError
        with pytest.raises(CliError) as e:
            cmd_flash.run(args, main=not_in_boot_mode)
        assert e.value.status == 1 and "boot (download) mode" in str(e.value)
        from tssb.cli import deploy as cmd_deploy
        dargs = argparse.Namespace(board="tbeam", plan="EU868.a", name=None, no_ble=False,
                                   ble_name=None, power=None, sf=None, no_mip=True,
                                   bundle_dir=None, dry_run=False, port=None)
        with pytest.raises(CliError) as e:
            cmd_deploy.run(dargs, list_fn=lambda: [])
        assert e.value.status == 1 and "no USB serial port" in str(e.value)
    finally:
        ports.check_access = orig


def test_peer_add_changes_only_what_is_given(pair):
    a = pair[0]
    key = "11" * 32
    assert tssb("peer", "add", key, "--name", "carol", "--addr", "10.0.0.5:8008",
                "--home", a).code == 0

    def carol():
        r = tssb("peer", "list", "--json", "--home", a)
        return [json.loads(line) for line in r.out.splitlines()
                if json.loads(line)["public"] == key][0]
    assert tssb("peer", "add", key, "--addr", "10.0.0.6:8008", "--home", a).code == 0
    assert (carol()["name"], carol()["addr"]) == ("carol", "10.0.0.6:8008")
    assert tssb("peer", "add", key, "--name", "caro", "--home", a).code == 0
    assert (carol()["name"], carol()["addr"]) == ("caro", "10.0.0.6:8008")
    assert tssb("peer", "add", key, "--addr", "", "--home", a).code == 0
    assert (carol()["name"], carol()["addr"]) == ("caro", "")


def test_addresses_match_however_written_and_are_not_shared(pair):
    a, b, cb, server = pair
    port = server.addr.split(":")[1]
    assert tssb("post", "--home", a, "hello bee").code == 0
    for spelling in ("localhost:%s" % port, "LocalHost:%s" % port):
        r = tssb("sync", "--home", a, "--peer", spelling)
        assert r.code == 0, (spelling, r)
    r = tssb("peer", "add", "22" * 32, "--addr", "localhost:%s" % port, "--home", a)
    assert r.code == 1 and "already the address of peer" in r.err, r
    # B's feed read on A by the name A gave B as a peer
    assert tssb("post", "--home", pair[1], "hello from bee").code == 0
    assert tssb("sync", "--home", a, "--peer", server.addr).code == 0
    r = tssb("read", "bee", "--home", a)
    assert r.code == 0 and "hello from bee" in r.out and "bee (" in r.out, r


def test_dag_commands_read_well(pair):
    a, b, cb, server = pair
    r = tssb("dag", "post", "--home", a, "the root")
    root = r.out.split()[0]
    assert tssb("dag", "post", "--home", a, "--root", root[:10], "a reply").code == 0
    r = tssb("dag", "show", root[:8], "--home", a)
    assert r.code == 0 and "a reply" in r.out and root in r.out, r
    r = tssb("read", "self", "--home", a)
    assert "[new DAG: the root]" in r.out and "[in DAG %s: a reply]" % root[:16] in r.out, r
    r = tssb("dag", "sync", "--home", a, "--peer", server.addr, "--root", root[:12])
    assert r.code == 0 and "\r" not in r.err, r          # not a terminal: no \r redraws
    assert "received 0 messages" in r.out or "sent" in r.out


def test_post_file_progress_and_board_note(tmp_path, pair):
    a = pair[0]
    f = tmp_path / "big.bin"
    f.write_bytes(os.urandom(150 * 1024))
    r = tssb("post", "--home", a, "--file", f, "--raw", "--force")
    assert r.code == 0 and "signing and storing 1536 chunks" in r.err, r
    assert "boards fetch side chains of up to 1000 chunks" in r.err


def test_flash_dry_run_checks_the_image_and_warns_of_the_erase(tmp_path):
    good = tmp_path / "s3.bin"
    good.write_bytes(b"\xe9" + bytes(11) + b"\x09\x00" + bytes(100))
    r = tssb("flash", "--board", "heltec-v3", "--image", good, "--dry-run")
    assert r.code == 0 and "identity" in r.err and "--no-erase" in r.err, r
    r = tssb("flash", "--board", "heltec-v3", "--image", good, "--dry-run", "--no-erase")
    assert r.code == 0 and "identity" not in r.err, r
    r = tssb("flash", "--board", "tbeam", "--image", good, "--dry-run")
    assert r.code == 1 and "built for ESP32-S3" in r.err and "an ESP32:" in r.err, r
    junk = tmp_path / "notes.txt"
    junk.write_text("not firmware")
    r = tssb("flash", "--board", "tbeam", "--image", junk, "--dry-run")
    assert r.code == 1 and "not an ESP32 firmware image" in r.err, r
    # a dry run touches no board: a port that is not there is only printed
    r = tssb("deploy", "--board", "heltec-v3", "--plan", "EU868.a", "--dry-run", "--port",
             "/dev/ttyNOPE")
    assert r.code == 0 and "mpremote connect /dev/ttyNOPE" in r.out, r


def test_listen_says_the_board_in_words():
    from tssb.cli.listen import format_message
    line = format_message(("hello", {"role": "device", "name": "garden1", "fw": "0.3"}), 0)
    assert line.endswith("board fw=0.3 name=garden1 role=device") and "{" not in line


def test_store_paths_say_what_is_wrong(tmp_path):
    home = str(tmp_path / "h")
    assert tssb("id", "--home", home).code == 0
    r = tssb("store", "restore", "/", "--home", home)
    assert r.code == 1 and "a directory, not a backup file" in r.err, r
    r = tssb("store", "backup", str(tmp_path / "no" / "such" / "b.db"), "--home", home)
    assert r.code == 1 and "b.db" in r.err and ".tmp" not in r.err, r
    r = tssb("feeds", "--home", os.path.join(home, "tssb.db"))
    assert r.code == 2 and "the home is the directory that holds it" in r.err, r
    assert "tssb id" not in r.err                        # not: "make a new home"


def test_sync_errors_name_no_protocol_states():
    from tssb.cli.sync import setu_words
    from tssb.setu.errors import SetuError
    for reason in ("peer closed", "timeout", "unexpected message"):
        text = setu_words(SetuError(reason, "in state rl_wait_elements"), 60)
        assert "state" not in text and "rl_" not in text, text


def test_id_network_says_a_running_serve_must_restart(tmp_path):
    home = str(tmp_path / "h")
    assert tssb("id", "--home", home).code == 0
    p = spawn("serve", "--port", "0", "--home", home)
    try:
        wait_stderr(p, "serving")
        r = tssb("id", "--network", "new", "--home", home)
        assert r.code == 0 and "tssb serve (pid %d)" % p.pid in r.err and "restart" in r.err, r
    finally:
        p.terminate()
        p.wait(10)
    r = tssb("id", "--network", "new", "--home", home)
    assert r.code == 0 and "restart" not in r.err, r


def test_readme_sync_two_hosts_runs_as_written(tmp_path):
    """The recipe's commands, with the values each step shows put into the next."""
    text = open(README, encoding="utf-8").read()
    recipe = text[text.index("### Sync two hosts"):text.index("### One home")]
    cmds = [line.split("#")[0].strip() for line in recipe.splitlines()
            if line.startswith("tssb ")]
    assert [c.split()[:2] for c in cmds] == [["tssb", "id"], ["tssb", "id"], ["tssb", "peer"],
                                            ["tssb", "peer"], ["tssb", "serve"]], cmds
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    r = tssb(*cmds[0].split()[1:], "--json", "--home", a)
    info_a = json.loads(r.out)
    r = tssb(*cmds[1].replace("HEX", info_a["network_key"]).split()[1:], "--json", "--home", b)
    info_b = json.loads(r.out)
    assert info_b["network_fingerprint"] == info_a["network_fingerprint"]
    # serve first (on a free port), so the address B records is the one A listens on
    serve = cmds[4].split()[1:]
    serve[serve.index("0.0.0.0")] = "127.0.0.1"
    assert tssb(*cmds[3].replace("B_ID", info_b["id"]).split()[1:], "--home", a).code == 0
    p = spawn(*serve, "--port", "0", "--home", a)
    try:
        line = wait_stderr(p, "serving")[-1]
        addr = "127.0.0.1:%s" % re.search(r" on 127\.0\.0\.1:(\d+)", line).group(1)
        r = tssb(*cmds[2].replace("A_ID", info_a["id"]).replace("A_HOST:8008", addr)
                 .split()[1:], "--home", b)
        assert r.code == 0, r
        assert tssb("post", "hello from b", "--home", b).code == 0
        r = tssb("sync", "--peer", addr, "--home", b)
        assert r.code == 0, r
    finally:
        p.terminate()
        p.wait(10)
