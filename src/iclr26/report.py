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
from typing import Any

from iclr26.claims import VERDICTS, claim_kind, summary_counts  # noqa: F401
from iclr26.core.errors import UserError
from iclr26.core.io import atomic_write_text


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        if x != x:
            return "nan"
        if x == 0 or 1e-3 <= abs(x) < 1e5:
            return f"{x:.4g}"
        return f"{x:.3e}"
    return str(x)


def _verdict(c: dict) -> str:
    v = c.get("verdict") or ("held" if c.get("holds") else "not held")
    return v if c.get("gated", True) else f"{v} (reported only)"


def _est_text(e: dict | None) -> str:
    if not e:
        return "-"
    if e.get("unit") == "exact":
        return f"{_fmt(e['value'])} (exact)"
    return f"{_fmt(e['value'])} [{_fmt(e['lo'])}, {_fmt(e['hi'])}] /{e.get('n', '?')} {e.get('unit', '')}"


def _claim_est(c: dict) -> dict:
    return c.get("estimate") or {"value": c["value"], "lo": float("nan"), "hi": float("nan"), "unit": "?", "n": 0}


CLAIM_HEADER = ["claim", "verdict", "estimate [95% interval] / unit", "gate", "null arm", "statement"]


def claims_table_rows(claims: list[dict]) -> list[list[str]]:
    rows = []
    for c in claims:
        null = c.get("null")
        null_txt = f"{c.get('null_what') or 'null'}: {_est_text(null)}" if null else (c.get("why") or "-")
        stmt = c["statement"] + (f" ({c['reason']})" if c.get("reason") else "")
        rows.append([c["name"], _verdict(c), _est_text(_claim_est(c)), f"{c['op']} {_fmt(c['threshold'])}",
                     null_txt, stmt])
    return rows


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


def _kind(c: dict) -> str:
    return c.get("kind") or claim_kind(c["name"], c.get("statement", ""))


def _claims_of(data: dict[str, Any]) -> list[dict]:
    cl = data["claims"]
    return cl["claims"] if isinstance(cl, dict) else cl


def _headline_of(data: dict[str, Any]) -> str:
    cl = data["claims"]
    return cl.get("headline", "") if isinstance(cl, dict) else ""


def headline_text(data: dict[str, Any]) -> str:
    """``C1: held`` for the run's headline claim, or ``-`` where the paper names none."""
    head = _headline_of(data)
    c = next((c for c in _claims_of(data) if c["name"] == head), None)
    return f"{head}: {_verdict(c)}" if c else "-"


def render_run_markdown(run_dir: str | Path) -> str:
    """The ``report.md`` text of one run, from the files in ``run_dir`` (pure: writes nothing).

    The engine calls it on the staging folder of a run that has just finished, before the rename.
    """
    return run_markdown(_load(Path(run_dir), staging=True))


COUNTS_TEXT = "held / not held / inconclusive / no power"


def _lock_text(env: dict) -> str:
    lock = env.get("lock") or {}
    if not isinstance(lock, dict) or not lock.get("file"):
        return "Environment: not from a pinned install (verdicts were recorded with `constraints.txt`)."
    text = f"Environment: `{lock['file']}`"
    if lock.get("matches"):
        text += f", {lock['matches']} pins match the installed packages"
        if lock.get("differ"):
            text += " (differ: " + ", ".join(lock["differ"]) + ")"
    return text + "."


def run_markdown(data: dict[str, Any], *, fig_prefix: str = "figures/") -> str:
    cfg = data["config"]
    slug = cfg.get("slug", data["dir"].name)
    from iclr26 import registry

    try:
        title = registry.get(slug).title
    except UserError:
        title = slug
    claims = _claims_of(data)
    n = summary_counts(claims)
    paper = [c for c in claims if _kind(c) == "paper"]
    checks = [c for c in claims if _kind(c) != "paper"]
    seeds = cfg.get("seeds") or [cfg.get("seed")]
    lines = [f"# {slug} — {title}", "",
             f"**Headline** ({headline_text(data)}).", "",
             f"Preset `{cfg.get('preset')}`, seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}, "
             f"{data['env'].get('threads', '?')} thread(s), device {data['env'].get('device')}, "
             f"wall time {_fmt(data['metrics'].get('wall_time_s', float('nan')))} s. "
             f"Gated paper claims ({COUNTS_TEXT}): {n.paper_text()} ({n.paper_reported} more reported only); "
             f"controls and sanity checks held: {n.checks_text()}.", "",
             _lock_text(data["env"]), "",
             "A verdict is *held* when the whole 95 % interval is on the passing side of the gate, *not held* when "
             "it is wholly on the failing side, *inconclusive* otherwise, and *no power* when the null arm passes "
             "the same gate.", "",
             *[f"**{line}**\n" for line in missing_asset_lines(data.get("missing_assets", []))],
             "## Paper claims", "", _md_table(CLAIM_HEADER, claims_table_rows(paper)), ""]
    if checks:
        lines += ["## Controls and sanity checks", "", _md_table(CLAIM_HEADER, claims_table_rows(checks)), ""]
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
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:.92em}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3}.missing{background:#fee;border:2px solid #c00;padding:.4em .8em;font-weight:600;color:#900}
.v-held{color:#0a0;font-weight:600}.v-not-held{color:#c00;font-weight:600}.v-inconclusive{color:#b70;font-weight:600}
.v-no-power{color:#808;font-weight:600}.reported{color:#777}
img{max-width:100%;border:1px solid #eee}figure{margin:1.2em 0}figcaption{font-size:.9em;color:#555}
pre{background:#f7f7f7;padding:.6em;overflow:auto;font-size:.85em;white-space:pre-wrap}details{margin:.5em 0}
"""


def _vclass(c: dict | None) -> str:
    if c is None:
        return ""
    if not c.get("gated", True):
        return "reported"
    return "v-" + (c.get("verdict") or ("held" if c.get("holds") else "not held")).replace(" ", "-")


def _html_run(data: dict[str, Any]) -> str:
    cfg = data["config"]
    slug = cfg.get("slug", data["dir"].name)
    e = html.escape

    def row(c: dict) -> str:
        cells = claims_table_rows([c])[0]
        detail = f"<br><small>{e(c['detail'])}</small>" if c.get("detail") else ""
        return (f"<tr><td>{e(cells[0])}</td><td class='{_vclass(c)}'>{e(cells[1])}</td>"
                + "".join(f"<td>{e(x)}</td>" for x in cells[2:5]) + f"<td>{e(cells[5])}{detail}</td></tr>")

    claims = _claims_of(data)
    head = "<tr>" + "".join(f"<th>{e(h)}</th>" for h in CLAIM_HEADER) + "</tr>"
    paper = [row(c) for c in claims if _kind(c) == "paper"]
    checks = [row(c) for c in claims if _kind(c) != "paper"]
    rows = ["<tr><th colspan='6'>paper claims</th></tr>", *paper]
    if checks:
        rows += ["<tr><th colspan='6'>controls and sanity checks</th></tr>", *checks]
    parts = [f"<h2 id='{e(slug)}'>{e(slug)} <small>({e(str(data['dir']))})</small></h2>",
             f"<p>Headline: {e(headline_text(data))}. Preset <code>{e(str(cfg.get('preset')))}</code>, "
             f"seeds {e(', '.join(map(str, cfg.get('seeds') or [cfg.get('seed')])))}, "
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
    summary, heads = [], []
    for d in datas:
        claims = _claims_of(d)
        n = summary_counts(claims)
        head = next((c for c in claims if c["name"] == _headline_of(d)), None)
        heads.append(head)
        summary.append([d["config"].get("slug", d["dir"].name), headline_text(d), str(d["config"].get("preset")),
                        n.paper_text(), str(n.paper_reported), n.checks_text(),
                        _fmt(d["metrics"].get("wall_time_s", float("nan"))),
                        "; ".join(missing_asset_lines(d["missing_assets"])) or "-", str(d["dir"])])
    header = ["paper", "headline", "preset", f"gated paper claims ({COUNTS_TEXT})", "reported only",
              "controls & sanity held", "wall s", "missing assets", "run"]
    md = ["# iclr26 report", "", _md_table(header, summary), ""]
    for d in datas:
        rel = d["dir"].resolve().relative_to(out.resolve()) if d["dir"].resolve().is_relative_to(out.resolve()) else d["dir"].resolve()
        md.append(run_markdown(d, fig_prefix=f"{rel.as_posix().rstrip('/')}/figures/"))
    md_path = out / "report.md"
    atomic_write_text(md_path, "\n".join(md))
    e = html.escape

    def cell(i: int, c: str, head: dict | None) -> str:
        if i == 1:  # verdict colours only: the headline's verdict
            return f"<td class='{_vclass(head)}'>{e(c)}</td>"
        if i == 7 and c != "-":
            return f"<td class='missing'>{e(c)}</td>"
        return f"<td>{e(c)}</td>"

    srows = "".join("<tr>" + "".join(cell(i, c, h) for i, c in enumerate(r)) + "</tr>"
                    for r, h in zip(summary, heads, strict=True))
    body = [f"<h1>iclr26 report</h1><table><tr>{''.join(f'<th>{e(h)}</th>' for h in header)}</tr>{srows}</table>"]
    body += [_html_run(d) for d in datas]
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>iclr26 report</title>"
            f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>")
    html_path = out / "report.html"
    atomic_write_text(html_path, page)
    return md_path, html_path
