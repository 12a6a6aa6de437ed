"""`tssb cert`: Merkle feed certificates: make, verify, compare (docs/certs.md)."""
import json
import sys

from tssb.cli import EXIT_FAILURE, CliError, open_home, resolve_feed

FORMS = ("auto", "bridging", "compact", "head")
MAX_FILE = 64 * 1024  # certificates are < 4.2 KB and fork proofs < 8.5 KB; refuse more


def register(subparsers):
    p = subparsers.add_parser(
        "cert", help="Merkle feed certificates: prove an entry is in a feed's history",
        description="A certificate proves with O(log n) hashes and signatures that entry SEQ "
                    "belongs to the signed history of a feed, without entries 1..SEQ-1. "
                    "Two certificates of one feed can be compared; if the author forked "
                    "the feed, the comparison yields a fork proof anyone can check.")
    sub = p.add_subparsers(dest="cert_command", metavar="ACTION")
    p.set_defaults(func=lambda _args: p.print_help() or 2)

    sp = sub.add_parser(
        "make", help="write the certificate of entry SEQ of FEED to a file",
        description="Write a certificate file for entry SEQ of FEED. Your own feed is "
                    "certified up to its newest entry first (the records are kept in the "
                    "host database); for other feeds the author's records must be present.")
    sp.add_argument("feed", metavar="FEED",
                    help="'self', a feed ID (64 hex digits or @base64.ed25519) or a unique "
                         "prefix of a stored one")
    sp.add_argument("seq", metavar="SEQ", type=int, help="entry number (1-based)")
    sp.add_argument("--form", choices=FORMS, default="auto",
                    help="auto (default): compact once the feed has grown to the next power "
                         "of two, else bridging; head: anchored at the newest certified entry")
    sp.add_argument("--anchor", type=int, metavar="N",
                    help="anchor at entry N (SEQ <= N <= newest); overrides --form")
    sp.add_argument("-o", "--output", metavar="FILE",
                    help="output file (default: <feed prefix>-<SEQ>.tssbcert here)")
    sp.add_argument("--json", action="store_true", help="print the result as one JSON object")
    sp.set_defaults(func=cmd_make)

    sp = sub.add_parser(
        "verify", help="verify a certificate or fork proof file and print what it proves",
        description="Verify certificate or fork proof files (Ed25519). Exit status 0 if all "
                    "are valid, 1 otherwise. No data directory is needed.")
    sp.add_argument("files", metavar="FILE", nargs="+")
    sp.add_argument("--feed", metavar="HEX", help="require certificates to be of this feed")
    sp.add_argument("--json", action="store_true", help="one JSON object per file")
    sp.set_defaults(func=cmd_verify)

    sp = sub.add_parser(
        "compare", help="check that two certificates of one feed do not contradict",
        description="Verify two certificates of one feed and compare them. Prints "
                    "'consistent', 'contradiction' (and writes a fork proof with -o) or "
                    "'unlinked' with the certificate that decides it (make it with "
                    "`tssb cert make FEED SEQ --anchor N` where the later one came from). "
                    "Exit status 0 consistent, 1 contradiction, 3 unlinked.")
    sp.add_argument("a", metavar="FILE_A")
    sp.add_argument("b", metavar="FILE_B")
    sp.add_argument("-o", "--output", metavar="FILE",
                    help="where to write the fork proof (default: fork-<feed prefix>.tssbfork)")
    sp.set_defaults(func=cmd_compare)

    sp = sub.add_parser("status", help="how far feeds are certified",
                        description="For each stored feed (or FEED): entries held and "
                                    "entries certified.")
    sp.add_argument("feed", metavar="FEED", nargs="?")
    sp.add_argument("--json", action="store_true", help="one JSON object per feed")
    sp.set_defaults(func=cmd_status)


def _certlog(ctx, fid):
    from tssb.certs import CertError, CertLog, SqliteRecords
    try:
        return CertLog(SqliteRecords.for_store(ctx.store), fid)
    except CertError as e:
        raise CliError("cannot open the certificate table: %s" % e, EXIT_FAILURE)


def _progress(done, total):
    if total >= 4096:
        sys.stderr.write("\rcertifying: %d/%d entries" % (done, total))
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _extend_own(ctx, log):
    """Certify the own feed up to its newest entry; returns the number added."""
    if log.fid != ctx.identity.public or not ctx.store.has_feed(log.fid):
        return 0
    return log.certify(ctx.store, ctx.identity.seed, progress=_progress)


def _anchor(args, log):
    from tssb.certs import certificate as cm
    if args.anchor is not None:
        return args.anchor
    if args.form == "bridging":
        return args.seq
    if args.form == "compact":
        return cm.next_pow2(args.seq)
    if args.form == "head":
        return log.front()
    return log.default_anchor(args.seq)


def cmd_make(args):
    from tssb.certs import CertError
    ctx = open_home(args)
    try:
        fid = resolve_feed(ctx, args.feed)
        if not ctx.store.has_feed(fid):
            raise CliError("feed %s is not stored here (see `tssb feeds`)" % fid.hex(),
                           EXIT_FAILURE)
        log = _certlog(ctx, fid)
        try:
            _extend_own(ctx, log)
            top = ctx.store.front(fid)[0]
            if not 1 <= args.seq <= top:
                raise CliError("entry %d is not stored here: this host holds entries 1..%d of "
                               "the feed" % (args.seq, top), EXIT_FAILURE)
            if log.front() < args.seq:
                raise CliError("entry %d is not certified: this host has the author's records "
                               "up to %d only" % (args.seq, log.front()), EXIT_FAILURE)
            anchor = _anchor(args, log)
            if anchor > log.front():
                raise CliError("anchor %d not available yet: certified up to %d (the compact "
                               "form needs the feed grown to %d)" % (anchor, log.front(), anchor),
                               EXIT_FAILURE)
            cert = log.certificate(ctx.store, args.seq, anchor)
        except CertError as e:
            raise CliError(str(e), EXIT_FAILURE)
        raw = cert.encode()
        out = args.output or "%s-%d.tssbcert" % (fid.hex()[:16], args.seq)
        with open(out, "wb") as f:
            f.write(raw)
        if args.json:
            print(json.dumps({"file": out, "feed": fid.hex(), "seq": args.seq,
                              "form": cert.form, "anchor": anchor, "bytes": len(raw)}))
            return 0
        print("wrote %s: entry %d of feed %s, %s form (anchor %d), %d bytes"
              % (out, args.seq, fid.hex()[:16], cert.form, anchor, len(raw)))
    finally:
        ctx.close()
    return 0


def _read(path):
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE + 1)
    except OSError as e:
        raise CliError("cannot read %s: %s" % (path, e.strerror or e))
    if len(data) > MAX_FILE:
        raise CliError("%s is larger than any certificate (%d bytes max)" % (path, MAX_FILE))
    return data


def _content(pkt):
    from tinyssb import entry
    from tinyssb.errors import WireError
    if pkt[7] == entry.CHAIN20:
        try:
            info = entry.chain_info(pkt)
        except WireError:
            return "chain20, bad length field"
        more = ", %d side-chain chunks not included" % info.n_chunks if info.n_chunks else ""
        return "chain20, %d bytes: %r%s" % (info.length, info.inline, more)
    return "type %d, payload %r" % (pkt[7], bytes(pkt[8:56]).rstrip(b"\0"))


def describe(v):
    """Lines saying what a verified certificate proves."""
    return ["valid certificate (%s form, %d bytes)" % (v.form, len(v.raw)),
            "  feed    %s" % v.fid.hex(),
            "  entry   %d, MID %s" % (v.seq, v.mid.hex()),
            "  content %s" % _content(v.pkt),
            "  proves  this is entry %d of the history of entries 1..%d that the feed key "
            "signed" % (v.seq, v.anchor)]


def cmd_verify(args):
    from tssb.certs import CertError, certificate, forks
    fid = None
    if args.feed:
        from tssb.context import parse_public_key
        try:
            fid = parse_public_key(args.feed)   # a feed ID is its author's public key
        except ValueError as e:
            raise CliError("--feed: %s" % e)
    bad = 0
    for path in args.files:
        data = _read(path)
        try:
            if data.startswith(forks.MAGIC):
                r = forks.verify_proof(data)
                if fid is not None and r.fid != fid:
                    raise CertError("wrong_feed")
                if args.json:
                    print(json.dumps({"file": path, "valid": True, "kind": "fork_proof",
                                      "feed": r.fid.hex(), "at": [r.key[0], r.key[1]]}))
                    continue
                print("%s: valid FORK PROOF: feed %s signed two incompatible histories"
                      % (path, r.fid.hex()))
                print("  at %s %d: %s versus %s" % (r.key[0], r.key[1], r.value_a.hex(),
                                                   r.value_b.hex()))
                print("  certificates: entry %d (anchor %d) and entry %d (anchor %d)"
                      % (r.cert_a.seq, r.cert_a.anchor, r.cert_b.seq, r.cert_b.anchor))
            else:
                v = certificate.verify(data, fid=fid)
                if args.json:
                    print(json.dumps({"file": path, "valid": True, "kind": "certificate",
                                      "form": v.form, "feed": v.fid.hex(), "seq": v.seq,
                                      "anchor": v.anchor, "mid": v.mid.hex()}))
                    continue
                print("%s: %s" % (path, "\n".join(describe(v))))
        except CertError as e:
            bad += 1
            if args.json:
                print(json.dumps({"file": path, "valid": False, "reason": str(e)}))
            else:
                print("%s: INVALID: %s" % (path, e))
    return 1 if bad else 0


def cmd_compare(args):
    from tssb.certs import CertError, certificate, forks
    try:
        a = certificate.verify(_read(args.a))
        b = certificate.verify(_read(args.b))
        c = forks.compare(a, b)
    except CertError as e:
        raise CliError("cannot compare: %s" % e, status=2)
    if c.status == forks.CONSISTENT:
        print("consistent: both certificates are in one history (entries 1..%d agree)"
              % min(a.anchor, b.anchor))
        return 0
    if c.status == forks.UNLINKED:
        seq, anchor = c.link
        print("unlinked: no contradiction in what they share; to decide, get the "
              "certificate of entry %d anchored at %d from the source of the later one:"
              % (seq, anchor))
        print("  tssb cert make %s %d --anchor %d" % (a.fid.hex(), seq, anchor))
        return 3
    out = args.output or "fork-%s.tssbfork" % a.fid.hex()[:16]
    with open(out, "wb") as f:
        f.write(c.proof.encode())
    print("contradiction: feed %s is forked (%s %d differs); fork proof written to %s"
          % (a.fid.hex(), c.proof.key[0], c.proof.key[1], out))
    return 1


def cmd_status(args):
    ctx = open_home(args)
    try:
        fids = [resolve_feed(ctx, args.feed)] if args.feed else ctx.store.feeds()
        for fid in fids:
            fid = bytes(fid)
            log = _certlog(ctx, fid)
            held = ctx.store.front(fid)[0] if ctx.store.has_feed(fid) else 0
            own = " (own feed: certified on `cert make`)" if fid == ctx.identity.public else ""
            if args.json:
                print(json.dumps({"feed": fid.hex(), "entries": held,
                                  "certified": log.front(),
                                  "own": fid == ctx.identity.public}))
                continue
            print("%s  entries %d  certified %d%s" % (fid.hex(), held, log.front(), own))
    finally:
        ctx.close()
    return 0
