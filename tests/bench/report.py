"""report.py - the benchmark's figures: how they are kept, printed, saved to
build/bench.json, checked against the goals and compared between two runs.

A figure is one quantity with a unit and one value per run (at least three
runs, each ratio computed within one run, pair by pair), printed as
min / median / max.  bench.json keeps the values themselves, not only the
summary, so a later comparison can tell a change from noise: a change is
called out only when the new median falls outside the old run's [min, max]
and the other way round, and it is at least SMALL_CHANGE_PCT.
"""

import json
import statistics

SCHEMA = 1
# Changes of the median smaller than this are never called out, even when
# the runs were tight enough for the ranges not to overlap.
SMALL_CHANGE_PCT = 3.0


class Results:
    def __init__(self):
        self.figures = {}  # key -> dict, in the order first added
        self.notes = []
        self.errors = []

    def add(self, key, section, title, unit, value, better=None, command=None):
        """Appends one run's value of a figure (None: not measurable in that
        run, e.g. a ratio with a zero denominator).  command, when given,
        is what produced it (the perfctl or tool command line, with the
        run's own arguments as placeholders), kept with the figure and
        listed under its section's table."""
        fig = self.figures.setdefault(key, {
            "section": section, "title": title, "unit": unit, "better": better, "values": []})
        if command:
            fig["command"] = command
        fig["values"].append(None if value is None else float(value))

    def note(self, text):
        self.notes.append(text)

    def summary(self, key):
        fig = self.figures.get(key)
        values = [v for v in (fig or {}).get("values", []) if v is not None]
        if not values:
            return None
        return {"min": min(values), "median": statistics.median(values), "max": max(values),
                "n": len(values)}

    def median(self, key):
        s = self.summary(key)
        return s["median"] if s else None

    def to_json(self, meta, goals):
        figures = {}
        for key, fig in self.figures.items():
            figures[key] = dict(fig, **(self.summary(key) or {"n": 0}))
        return {"schema": SCHEMA, "meta": meta, "figures": figures, "goals": goals,
                "notes": self.notes, "errors": self.errors}


def fmt(v):
    """A number with about three significant digits, no exponent."""
    if v is None:
        return "n/a"
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    if a >= 0.01:
        return f"{v:.3f}"
    return f"{v:.2g}"


def table_rows(doc):
    """(section, title, unit, min, median, max, n, key) rows: sections in
    their numbered order, figures within one in the order they were added."""
    figures = list(doc["figures"].items())
    first_seen = {}
    for _, fig in figures:
        first_seen.setdefault(fig["section"], len(first_seen))

    def number(section):  # "10. ..." after "9. ...": by the number, then in the order measured
        head = section.split(".", 1)[0]
        return (int(head) if head.isdigit() else 1 << 30, first_seen[section])

    for section in sorted(first_seen, key=number):
        for key, fig in figures:
            if fig["section"] == section:
                yield (section, fig["title"], fig["unit"], fmt(fig.get("min")),
                       fmt(fig.get("median")), fmt(fig.get("max")), str(fig.get("n", 0)), key)


def print_table(doc, out):
    rows = list(table_rows(doc))
    w_title = max([len(r[1]) for r in rows] + [6])
    w_unit = max([len(r[2]) for r in rows] + [4])
    section = None
    for sec, title, unit, lo, med, hi, n, _ in rows:
        if sec != section:
            section = sec
            out.write(f"\n== {sec}\n")
            out.write(f"  {'figure':<{w_title}}  {'unit':<{w_unit}}  {'min':>9}  {'median':>9}  {'max':>9}  runs\n")
        out.write(f"  {title:<{w_title}}  {unit:<{w_unit}}  {lo:>9}  {med:>9}  {hi:>9}  {n:>4}\n")
    if doc["goals"]:
        out.write("\n== Goals (judged on the median)\n")
        for g in doc["goals"]:
            out.write(f"  [{g['verdict']:>4}] {g['goal']}: {fmt(g['value'])} {g['unit']}"
                      f"{'  (' + g['comment'] + ')' if g.get('comment') else ''}\n")
    for n in doc["notes"]:
        out.write(f"note: {n}\n")
    for e in doc["errors"]:
        out.write(f"ERROR: {e}\n")


def cell(text):
    """Text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|")


def section_commands(doc, section):
    """The distinct commands of a section's figures, in order."""
    out = []
    for fig in doc["figures"].values():
        c = fig.get("command")
        if fig["section"] == section and c and c not in out:
            out.append(c)
    return out


def markdown(doc):
    """The results as Markdown tables, for docs/PERFORMANCE.md; each table
    is followed by the commands its figures came from, when known."""
    lines = []
    section = None

    def end_section():
        if section is not None:
            commands = section_commands(doc, section)
            if commands:
                lines.extend(["", "Commands:", ""] + [f"- `{c}`" for c in commands])

    for sec, title, unit, lo, med, hi, n, _ in table_rows(doc):
        if sec != section:
            end_section()
            section = sec
            lines += ["", f"### {sec}", "", "| figure | unit | min | median | max | runs |",
                      "|---|---|--:|--:|--:|--:|"]
        lines.append(f"| {cell(title)} | {cell(unit)} | {lo} | {med} | {hi} | {n} |")
    end_section()
    if doc["goals"]:
        lines += ["", "### Goals", "", "| goal | median today | verdict |", "|---|--:|---|"]
        for g in doc["goals"]:
            comment = f" ({cell(g['comment'])})" if g.get("comment") else ""
            lines.append(f"| {cell(g['goal'])} | {fmt(g['value'])} {cell(g['unit'])} | **{g['verdict']}**{comment} |")
    if doc["notes"] or doc["errors"]:
        lines.append("")
    lines += [f"- {n}" for n in doc["notes"]] + [f"- **error**: {e}" for e in doc["errors"]]
    return "\n".join(lines) + "\n"


def judge_goals(results, goal_specs):
    """goal_specs: (text, key, limit, comment) with 'value <= limit' meaning
    met.  Returns the goals with their verdict."""
    goals = []
    for text, key, limit, comment in goal_specs:
        value = results.median(key)
        if value is None:
            verdict = "n/a"
        else:
            verdict = "met" if value <= limit else "MISS"
        unit = results.figures.get(key, {}).get("unit", "")
        goals.append({"goal": text, "figure": key, "limit": limit, "value": value,
                      "unit": unit, "verdict": verdict, "comment": comment})
    return goals


def compare(old_path, new_path, out):
    """Prints, figure by figure, the change of the median from OLD to NEW,
    and whether it is beyond the spread of the runs.  Returns 0."""
    with open(old_path) as f:
        old = json.load(f)
    with open(new_path) as f:
        new = json.load(f)
    om, nm = old.get("meta", {}), new.get("meta", {})
    out.write(f"old: {old_path}  ({om.get('date', '?')}, perfd {om.get('perfd_commit', '?')})\n")
    out.write(f"new: {new_path}  ({nm.get('date', '?')}, perfd {nm.get('perfd_commit', '?')})\n")
    if om.get("machine") != nm.get("machine"):
        out.write("warning: the two runs were made on different machines; ratios compare, absolutes may not\n")
    keys = list(old["figures"]) + [k for k in new["figures"] if k not in old["figures"]]
    w = max(len(k) for k in keys) if keys else 10
    out.write(f"\n{'figure':<{w}}  {'unit':<22}  {'old':>9}  {'new':>9}  {'change':>8}  verdict\n")
    for key in keys:
        o, n = old["figures"].get(key), new["figures"].get(key)
        if not o or not n or o.get("median") is None or n.get("median") is None:
            out.write(f"{key:<{w}}  {(o or n)['unit']:<22}  {fmt((o or {}).get('median')):>9}  "
                      f"{fmt((n or {}).get('median')):>9}  {'':>8}  only in one run\n")
            continue
        if o["unit"] != n["unit"]:
            out.write(f"{key:<{w}}  unit changed from {o['unit']} to {n['unit']}: not compared\n")
            continue
        change = (n["median"] - o["median"]) / abs(o["median"]) * 100 if o["median"] else None
        overlap = n["median"] >= o["min"] and n["median"] <= o["max"] or \
            o["median"] >= n["min"] and o["median"] <= n["max"]
        if overlap or (change is not None and abs(change) < SMALL_CHANGE_PCT):
            verdict = "within noise"
        elif n.get("better") in ("lower", "higher"):
            lower = n["median"] < o["median"]
            verdict = "BETTER" if lower == (n["better"] == "lower") else "WORSE"
        else:
            verdict = "changed"
        ch = "n/a" if change is None else f"{change:+.1f}%"
        out.write(f"{key:<{w}}  {n['unit']:<22}  {fmt(o['median']):>9}  {fmt(n['median']):>9}  {ch:>8}  {verdict}\n")
    og = {g["goal"]: g["verdict"] for g in old.get("goals", [])}
    for g in new.get("goals", []):
        if og.get(g["goal"]) not in (None, g["verdict"]):
            out.write(f"goal '{g['goal']}': {og[g['goal']]} -> {g['verdict']}\n")
    return 0
