"""`tssb demo`: the main job, also run by `make demo`."""


def register(sub):
    p = sub.add_parser("demo", help="run the end-to-end demo (simulated mesh, bridge, SETU, Spark report)",
                       description="Run the whole toolkit end to end on this machine with embedded "
                                   "defaults and print a summary a person can read.")
    p.add_argument("--out", default="out/demo", help="output directory for logs and report (default: out/demo)")
    p.add_argument("--seed", type=int, default=1,
                   help="random seed of the simulated mesh (its run is deterministic for a seed)")
    p.set_defaults(func=_run)


def _run(args):
    from tssb import demo
    return 0 if demo.run(args.out, args.seed) else 1
