"""Markdown and one self-contained HTML page over one or many run directories (thin layer).

The report layer only reads what the engine wrote into a run directory; it never writes into
one. :func:`render_run_markdown` returns the text the engine stores as a run's ``report.md``;
:func:`write_report` writes ``report.md`` and ``report.html`` beside the runs (their parent by
default), never inside a run directory.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any, NamedTuple

from iclr26.core.errors import UserError
from iclr26.core.io import atomic_write_text
from iclr26.runs import claim_kind


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        if x != x:
            return "nan"
        if x == 0 or 1e-3 <= abs(x) < 1e5:
            return f"{x:.4g}"
        return f"{x:.3e}"
    return str(x)


def _verdict(c: dict) -> str:
    if c["holds"]:
        return "held"
    return "not held" if c.get("gated", True) else "not held (reported only)"


def claims_table_rows(claims: list[dict]) -> list[list[str]]:
    return [[c["name"], _verdict(c), _fmt(c["value"]), f"{c['op']} {_fmt(c['threshold'])}", c["statement"]]
            for c in claims]


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    esc = [[str(cell).replace("|", "\\|").replace("\n", " ") for cell in row] for row in rows]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in esc]
    return "\n".join(lines)


def _load(run_dir: Path, *, staging: bool = False) -> dict[str, Any]:
    from iclr26.runs import PARTIAL_MARK

    if PARTIAL_MARK in run_dir.name and not staging:
        raise UserError(f"{run_dir} is an unfinished run (a staging folder left by an interrupted run)")
    if not (run_dir / "claims.json").exists():
        raise UserError(f"{run_dir} is not a finished iclr26 run directory (no claims.json)")
    data: dict[str, Any] = {"dir": run_dir}
    for name in ("config", "metrics", "claims", "env"):
        p = run_dir / f"{name}.json"
        data[name] = json.loads(p.read_text()) if p.exists() else {}
    notes = run_dir / "notes.md"
    data["notes"] = notes.read_text() if notes.exists() else ""
    cap = run_dir / "figures" / "captions.json"
    data["captions"] = json.loads(cap.read_text()) if cap.exists() else {}
    data["figures"] = sorted((run_dir / "figures").glob("*.png"))
    data["missing_assets"] = list(data["env"].get("missing_assets") or [])
    return data


def missing_asset_lines(missing: list[dict[str, str]]) -> list[str]:
    """One loud line per asset a run had to do without (name, what was skipped, how to install)."""
    out = []
    for m in missing:
        skipped = f" ({m['skipped']})" if m.get("skipped") else ""
        out.append(f"MISSING ASSET: {m['name']}{skipped}; install with: {m['install']}")
    return out


class ClaimCounts(NamedTuple):
    """Verdict counts of one run: the paper's own claims apart from controls and sanity checks."""

    paper_held: int  # gated paper claims that hold
    paper_gated: int
    paper_reported: int  # paper claims reported only (not gated at this preset)
    checks_held: int  # controls and sanity checks (gated or not) that hold
    checks: int
    gated_failed: int  # gated claims of any kind that do not hold

    def paper_text(self) -> str:
        return f"{self.paper_held}/{self.paper_gated}"

    def checks_text(self) -> str:
        return f"{self.checks_held}/{self.checks}"


def _kind(c: dict) -> str:
    return c.get("kind") or claim_kind(c["name"], c.get("statement", ""))


def summary_counts(claims: list[dict]) -> ClaimCounts:
    """Counts for summaries: gated paper claims held, reported-only paper claims, controls/sanity held."""
    paper = [c for c in claims if _kind(c) == "paper"]
    gated = [c for c in paper if c.get("gated", True)]
    checks = [c for c in claims if _kind(c) != "paper"]
    failed = sum(1 for c in claims if c.get("gated", True) and not c["holds"])
    return ClaimCounts(sum(bool(c["holds"]) for c in gated), len(gated), len(paper) - len(gated),
                       sum(bool(c["holds"]) for c in checks), len(checks), failed)


def render_run_markdown(run_dir: str | Path) -> str:
    """The ``report.md`` text of one run, from the files in ``run_dir`` (pure: writes nothing).

    The engine calls it on the staging folder of a run that has just finished, before the rename.
    """
    return run_markdown(_load(Path(run_dir), staging=True))


def run_markdown(data: dict[str, Any], *, fig_prefix: str = "figures/") -> str:
    cfg = data["config"]
    slug = cfg.get("slug", data["dir"].name)
    from iclr26 import registry

    try:
        title = registry.get(slug).title
    except UserError:
        title = slug
    claims = data["claims"]
    n = summary_counts(claims)
    paper = [c for c in claims if _kind(c) == "paper"]
    checks = [c for c in claims if _kind(c) != "paper"]
    head = ["claim", "verdict", "measured", "threshold", "statement"]
    lines = [f"# {slug} — {title}", "",
             f"Preset `{cfg.get('preset')}`, seed {cfg.get('seed')}, device {data['env'].get('device')}, "
             f"wall time {_fmt(data['metrics'].get('wall_time_s', float('nan')))} s. "
             f"Paper claims held: {n.paper_text()} gated ({n.paper_reported} more reported only); "
             f"controls and sanity checks held: {n.checks_text()}.", "",
             *[f"**{line}**\n" for line in missing_asset_lines(data.get("missing_assets", []))],
             "## Paper claims", "", _md_table(head, claims_table_rows(paper)), ""]
    if checks:
        lines += ["## Controls and sanity checks", "", _md_table(head, claims_table_rows(checks)), ""]
    details = [c for c in claims if c.get("detail")]
    if details:
        lines += ["", *[f"- **{c['name']}**: {c['detail']}" for c in details], ""]
    if data["notes"]:
        lines += ["## Notes", "", data["notes"].strip(), ""]
    lines += ["## Metrics", "",
              _md_table(["metric", "value"], [[k, _fmt(v)] for k, v in data["metrics"].items()]), ""]
    if data["figures"]:
        lines += ["## Figures", ""]
        for f in data["figures"]:
            cap = data["captions"].get(f.stem, f.stem)
            lines += [f"![{cap}]({fig_prefix}{f.name})", "", f"*{cap}*", ""]
    lines += ["## Config", "", "```json", json.dumps(cfg.get("config", {}), indent=2), "```", ""]
    return "\n".join(lines)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:.92em}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3}.missing{background:#fee;border:2px solid #c00;padding:.4em .8em;font-weight:600;color:#900}.held{color:#0a0;font-weight:600}.nothold{color:#c00;font-weight:600}.soft{color:#b70}
img{max-width:100%;border:1px solid #eee}figure{margin:1.2em 0}figcaption{font-size:.9em;color:#555}
pre{background:#f7f7f7;padding:.6em;overflow:auto;font-size:.85em}details{margin:.5em 0}
"""


def _html_run(data: dict[str, Any]) -> str:
    cfg = data["config"]
    slug = cfg.get("slug", data["dir"].name)
    e = html.escape
    def row(c: dict) -> str:
        cls = "held" if c["holds"] else ("nothold" if c.get("gated", True) else "soft")
        return (f"<tr><td>{e(c['name'])}</td><td class='{cls}'>{e(_verdict(c))}</td>"
                f"<td>{e(_fmt(c['value']))}</td><td>{e(c['op'])} {e(_fmt(c['threshold']))}</td>"
                f"<td>{e(c['statement'])}{'<br><small>' + e(c['detail']) + '</small>' if c.get('detail') else ''}</td></tr>")

    head = "<tr><th>claim</th><th>verdict</th><th>measured</th><th>threshold</th><th>statement</th></tr>"
    paper = [row(c) for c in data["claims"] if _kind(c) == "paper"]
    checks = [row(c) for c in data["claims"] if _kind(c) != "paper"]
    rows = ["<tr><th colspan='5'>paper claims</th></tr>", *paper]
    if checks:
        rows += ["<tr><th colspan='5'>controls and sanity checks</th></tr>", *checks]
    parts = [f"<h2 id='{e(slug)}'>{e(slug)} <small>({e(str(data['dir']))})</small></h2>",
             f"<p>Preset <code>{e(str(cfg.get('preset')))}</code>, seed {e(str(cfg.get('seed')))}, "
             f"wall time {e(_fmt(data['metrics'].get('wall_time_s', float('nan'))))} s.</p>",
             *[f"<p class='missing'>{e(line)}</p>" for line in missing_asset_lines(data.get("missing_assets", []))],
             f"<table>{head}", *rows, "</table>"]
    if data["notes"]:
        parts.append(f"<h3>Notes</h3><pre>{e(data['notes'])}</pre>")
    for f in data["figures"]:
        b64 = base64.b64encode(f.read_bytes()).decode()
        cap = data["captions"].get(f.stem, f.stem)
        parts.append(f"<figure><img alt='{e(cap)}' src='data:image/png;base64,{b64}'>"
                     f"<figcaption>{e(cap)}</figcaption></figure>")
    mrows = "".join(f"<tr><td>{e(k)}</td><td>{e(_fmt(v))}</td></tr>" for k, v in data["metrics"].items())
    parts.append(f"<details><summary>Metrics ({len(data['metrics'])})</summary><table>{mrows}</table></details>")
    parts.append(f"<details><summary>Config</summary><pre>{e(json.dumps(cfg.get('config', {}), indent=2))}</pre></details>")
    return "\n".join(parts)


def write_report(run_dirs: list[str | Path], out: str | Path | None = None) -> tuple[Path, Path]:
    """Render ``report.md`` and a self-contained ``report.html`` over one or many runs.

    They land in ``out`` (default: the parent folder of the first run), which must not be a run
    directory or lie inside one: the report never writes into a run.
    """
    if not run_dirs:
        raise UserError("iclr26 report needs at least one run directory")
    datas = []
    for d in run_dirs:
        p = Path(d)
        if not p.is_dir():
            raise UserError(f"run directory not found: {p}")
        datas.append(_load(p))
    out = Path(out) if out is not None else datas[0]["dir"].parent
    for d in datas:
        if out.resolve().is_relative_to(d["dir"].resolve()):
            raise UserError(f"--out {out}: is inside run directory {d['dir']}; the report never writes into a run")
    out.mkdir(parents=True, exist_ok=True)
    summary = []
    for d in datas:
        n = summary_counts(d["claims"])
        summary.append([d["config"].get("slug", d["dir"].name), str(d["config"].get("preset")),
                        n.paper_text(), str(n.paper_reported), n.checks_text(),
                        _fmt(d["metrics"].get("wall_time_s", float("nan"))),
                        "; ".join(missing_asset_lines(d["missing_assets"])) or "-", str(d["dir"])])
    header = ["paper", "preset", "paper claims held (gated)", "paper claims reported only",
              "controls & sanity held", "wall s", "missing assets", "run"]
    md = ["# iclr26 report", "", _md_table(header, summary), ""]
    for d in datas:
        rel = d["dir"].resolve().relative_to(out.resolve()) if d["dir"].resolve().is_relative_to(out.resolve()) else d["dir"].resolve()
        md.append(run_markdown(d, fig_prefix=f"{rel.as_posix().rstrip('/')}/figures/"))
    md_path = out / "report.md"
    atomic_write_text(md_path, "\n".join(md))
    e = html.escape
    srows = "".join("<tr>" + "".join(f"<td class='missing'>{e(c)}</td>" if (i == 5 and c != "-") else f"<td>{e(c)}</td>"
                                     for i, c in enumerate(r)) + "</tr>" for r in summary)
    body = [f"<h1>iclr26 report</h1><table><tr>{''.join(f'<th>{h}</th>' for h in header)}</tr>{srows}</table>"]
    body += [_html_run(d) for d in datas]
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>iclr26 report</title>"
            f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>")
    html_path = out / "report.html"
    atomic_write_text(html_path, page)
    return md_path, html_path
