"""`tssb cert make / verify / compare / status` on a real data directory."""
import pytest

from tinyssb import entry
from tssb import cli
from tssb.context import Context, Identity


def run(argv, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    out = capsys.readouterr()
    return e.value.code, out.out + out.err


@pytest.fixture
def home(tmp_path):
    h = str(tmp_path / "home")
    ctx = Context.open(h)
    fid = ctx.identity.public
    ctx.store.add_feed(fid)
    author = entry.Author(fid, ctx.identity.sign)
    for i in range(1, 21):
        seq, pkt, mid, chunks = author.next(b"entry number %d" % i)
        ctx.store.append(fid, seq, pkt, mid)
    ctx.close()
    return h, fid


def test_make_and_verify_own_feed(home, tmp_path, capsys):
    h, fid = home
    out = str(tmp_path / "c5.tssbcert")
    code, text = run(["cert", "make", "self", "5", "--home", h, "-o", out], capsys)
    assert code == 0 and "compact form (anchor 8)" in text
    code, text = run(["cert", "verify", out], capsys)
    assert code == 0
    assert fid.hex() in text and "this is entry 5 of the history of entries 1..8" in text
    assert "entry number 5" in text
    out20 = str(tmp_path / "c20.tssbcert")
    code, text = run(["cert", "make", fid.hex()[:12], "20", "--home", h, "-o", out20], capsys)
    assert code == 0 and "bridging form" in text
    code, text = run(["cert", "compare", out, out20], capsys)
    assert code == 3 and "--anchor 20" in text  # 1..8 vs 1..20: needs the link
    link = str(tmp_path / "link.tssbcert")
    code, _ = run(["cert", "make", "self", "8", "--anchor", "20", "--home", h, "-o", link],
                  capsys)
    assert code == 0
    code, text = run(["cert", "compare", out, link], capsys)
    assert code == 0 and text.startswith("consistent")
    code, text = run(["cert", "status", "--home", h], capsys)
    assert code == 0 and "entries 20  certified 20" in text


def test_verify_rejects_tampered_and_foreign(home, tmp_path, capsys):
    h, fid = home
    out = str(tmp_path / "c.tssbcert")
    run(["cert", "make", "self", "3", "--home", h, "-o", out], capsys)
    data = bytearray(open(out, "rb").read())
    data[-1] ^= 1
    bad = str(tmp_path / "bad.tssbcert")
    open(bad, "wb").write(bytes(data))
    code, text = run(["cert", "verify", out, bad], capsys)
    assert code == 1 and "INVALID: bad_signature" in text
    code, text = run(["cert", "verify", "--feed", "00" * 32, out], capsys)
    assert code == 1 and "wrong_feed" in text
    code, text = run(["cert", "make", "self", "21", "--home", h, "-o", out], capsys)
    assert code == 1 and "holds entries 1..20" in text
    code, text = run(["cert", "make", "self", "20", "--form", "compact", "--home", h], capsys)
    assert code == 1 and "not available yet" in text


def test_fork_proof_roundtrip(tmp_path, capsys):
    """A forked own feed (two data directories with one identity) yields a fork proof."""
    certs = []
    seed = None
    for name, text in (("a", b"honest"), ("b", b"forked")):
        h = str(tmp_path / name)
        ctx = Context.open(h)
        if seed is None:
            seed = ctx.identity.seed
        else:
            ctx.store.set_identity(seed, Identity(seed).public)
            ctx.close()
            ctx = Context.open(h)
        fid = ctx.identity.public
        ctx.store.add_feed(fid)
        author = entry.Author(fid, ctx.identity.sign)
        for i in range(1, 7):
            seq, pkt, mid, _ = author.next(b"%s %d" % (text if i > 3 else b"same", i))
            ctx.store.append(fid, seq, pkt, mid)
        ctx.close()
        out = str(tmp_path / ("%s.tssbcert" % name))
        assert run(["cert", "make", "self", "5", "--home", h, "-o", out], capsys)[0] == 0
        certs.append(out)
    proof = str(tmp_path / "fork.tssbfork")
    code, text = run(["cert", "compare", certs[0], certs[1], "-o", proof], capsys)
    assert code == 1 and "contradiction" in text
    code, text = run(["cert", "verify", proof], capsys)
    assert code == 0 and "valid FORK PROOF" in text
