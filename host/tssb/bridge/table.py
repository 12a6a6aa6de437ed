"""Plain-text tables for the live commands (aligned columns, a rule under the header)."""


def render(headers, rows):
    """Returns the table as one string (no trailing newline)."""
    rows = [[str(c) for c in r] for r in rows]
    w = [len(h) for h in headers]
    for r in rows:
        for i, c in enumerate(r):
            w[i] = max(w[i], len(c))
    line = lambda cells: "  ".join(c.ljust(w[i]) for i, c in enumerate(cells)).rstrip()
    out = [line(headers), "  ".join("-" * x for x in w)]
    out.extend(line(r) for r in rows)
    return "\n".join(out)
