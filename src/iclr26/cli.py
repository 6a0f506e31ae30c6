"""Command line: ``iclr26 list | show <slug> | run <slug>... | report DIR...``.

Bad input (unknown slug or key, planned paper, unwritable --out, missing asset) prints one line
on stderr and exits with code 2, without a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path

from iclr26.core.errors import UserError

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse's default prints usage too)
        raise UserError(message)


def _cmd_list(args: argparse.Namespace) -> int:
    from iclr26 import registry

    rows = [(p.num, p.slug, p.area, p.status, p.title) for p in registry.PAPERS]
    w = [max(len(r[i]) for r in rows) for i in range(4)]
    print(f"{'#':<{w[0]}}  {'slug':<{w[1]}}  {'area':<{w[2]}}  {'status':<{w[3]}}  title")
    for r in rows:
        print(f"{r[0]:<{w[0]}}  {r[1]:<{w[1]}}  {r[2]:<{w[2]}}  {r[3]:<{w[3]}}  {r[4]}")
    n = len(registry.implemented())
    print(f"\n{n} of {len(rows)} implemented; `iclr26 show <slug>` for details, `iclr26 run <slug>` to reproduce.")
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    from iclr26 import registry
    from iclr26.core.config import field_docs

    p = registry.get(args.slug)
    print(f"{p.num} {p.slug} — {p.title}")
    print(f"id: {p.id} · area: {p.area} · status: {p.status} · docs: {p.docs}")
    if p.module is None:
        return 0
    mod = p.load()
    desc = getattr(mod, "DESCRIPTION", "").strip()
    if desc:
        print()
        print(desc)
    presets = registry.presets(mod)
    base = mod.Config()
    docs = field_docs(mod.Config)
    names = list(presets)
    print("\nconfig (default value, then preset overrides):")
    for f in dataclasses.fields(base):
        default = getattr(base, f.name)
        over = ", ".join(f"{pr}={presets[pr][f.name]!r}" for pr in names if f.name in presets[pr])
        print(f"  {f.name} = {default!r}" + (f"   [{over}]" if over else ""))
        if docs.get(f.name):
            print(f"      {docs[f.name]}")
    print(f"\npresets: {', '.join(names)}  (iclr26 run {p.slug} --preset NAME --set key=value)")
    return 0


def _parse_sets(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        if "=" not in item:
            raise UserError(f"--set expects key=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _cmd_run(args: argparse.Namespace) -> int:
    from iclr26 import registry
    from iclr26.engine import build_config, run_paper
    from iclr26.report import claims_table_rows, write_report

    slugs = registry.implemented() if args.slugs == ["all"] else args.slugs
    # validate everything before any work starts (slugs, presets, --set keys)
    overrides = _parse_sets(args.set)
    for slug in slugs:
        p = registry.get(slug)
        p.load()
        if len(slugs) == 1 or not overrides:
            build_config(slug, args.preset, overrides)
        else:
            build_config(slug, args.preset, None)
    run_dirs = []
    failures = 0
    for slug in slugs:
        print(f"== {slug} (preset {args.preset}) ==", flush=True)
        sets = overrides if len(slugs) == 1 else _applicable(slug, overrides)
        run_dir, result = run_paper(slug, preset=args.preset, out=args.out, overrides=sets,
                                    seed=args.seed, device=args.device)
        run_dirs.append(run_dir)
        claims = [c.to_dict() for c in result.claims]
        rows = claims_table_rows(claims)
        w = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(["claim", "verdict", "measured", "threshold"])]
        print(f"  {'claim':<{w[0]}}  {'verdict':<{w[1]}}  {'measured':<{w[2]}}  {'threshold':<{w[3]}}  statement")
        for r in rows:
            print(f"  {r[0]:<{w[0]}}  {r[1]:<{w[1]}}  {r[2]:<{w[2]}}  {r[3]:<{w[3]}}  {r[4]}")
        gated = [c for c in claims if c["gated"]]
        bad = [c for c in gated if not c["holds"]]
        failures += bool(bad) and args.preset != "smoke"
        print(f"  gated claims held: {len(gated) - len(bad)}/{len(gated)} · "
              f"wall {result.metrics['wall_time_s']:.1f} s · run dir: {run_dir}", flush=True)
    if len(run_dirs) > 1 or args.report:
        md, html = write_report(run_dirs, out=Path(args.out) if len(run_dirs) > 1 else None)
        print(f"\nreport: {html}\n        {md}")
    return 1 if (failures and args.strict) else 0


def _applicable(slug: str, overrides: dict[str, str]) -> dict[str, str]:
    from iclr26 import registry

    names = {f.name for f in dataclasses.fields(registry.get(slug).load().Config)}
    return {k: v for k, v in overrides.items() if k in names}


def _cmd_report(args: argparse.Namespace) -> int:
    from iclr26.report import write_report

    md, html = write_report(args.dirs, out=args.out)
    print(f"report: {html}\n        {md}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="iclr26", description="Reference implementations and CPU reproductions of ICLR 2026 papers.")
    ap.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    s = sub.add_parser("list", help="all papers with their status")
    s.set_defaults(func=_cmd_list)
    s = sub.add_parser("show", help="a paper's reproduction, config fields and presets")
    s.add_argument("slug")
    s.set_defaults(func=_cmd_show)
    s = sub.add_parser("run", help="run reproductions: iclr26 run <slug>... | all")
    s.add_argument("slugs", nargs="+", help="paper slugs, or 'all' for every implemented paper")
    s.add_argument("--preset", default="default", help="smoke | default | paper (default: default)")
    s.add_argument("--out", default="runs", help="parent folder for run directories (default: runs)")
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config field")
    s.add_argument("--seed", type=int, default=0, help="global seed (default 0)")
    s.add_argument("--device", default="auto", help="auto | cpu | cuda (default auto)")
    s.add_argument("--report", action="store_true", help="also write report.html for a single run")
    s.add_argument("--strict", action="store_true", help="exit 1 if a gated claim does not hold")
    s.set_defaults(func=_cmd_run)
    s = sub.add_parser("report", help="report.md + self-contained report.html over run directories")
    s.add_argument("dirs", nargs="+", help="run directories")
    s.add_argument("--out", default=None, help="where to write (default: the run dir, or the parent of the first)")
    s.set_defaults(func=_cmd_report)
    return ap


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        args = build_parser().parse_args(argv)
        if args.verbose:
            logging.getLogger("iclr26").setLevel(logging.INFO)
        return int(args.func(args) or 0)
    except UserError as e:
        print(f"iclr26: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("iclr26: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
