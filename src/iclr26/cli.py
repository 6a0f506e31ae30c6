"""Command line: ``iclr26 list | show <slug> | run <slug>... | report DIR... | status | cache list|clear``.

Bad input (unknown slug or key, a value outside a field's declared range, planned paper,
unwritable --out, missing asset) prints one line on stderr and exits with code 2, without a
traceback, before any run directory exists. Ctrl-C exits with 130 and leaves no run directory.
With several papers, one that fails is reported in the closing summary table and the others go on.

``iclr26 run <slug>... --plan`` runs nothing and writes nothing: it checks the config as a run would, lists the
data, weights, packages and device each paper needs (with the command or URL that provides a missing one) and
estimates GPU memory and wall time (:mod:`iclr26.plan`). It exits with 0 when nothing is missing, 3 when
something is (``EXIT_MISSING``), and 2 on a config error like a run.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import logging
import sys
import traceback
from pathlib import Path

from iclr26.core.errors import UserError

EXIT_USAGE = 2
EXIT_MISSING = 3  # run --plan: something the run needs is missing


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
    from iclr26.core.config import describe_range, field_docs

    p = registry.get(args.slug)
    print(f"{p.num} {p.slug} — {p.title}")
    print(f"id: {p.id} · area: {p.area} · status: {p.status} · docs: {p.docs}")
    if p.library:
        print(f"code: {p.module} · library: {', '.join(p.library)}")
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
        rng = describe_range(mod.Config, f.name)
        if docs.get(f.name) or rng:
            print(f"      {docs.get(f.name, '')}" + (f"  (valid: {rng})" if rng else ""))
    print(f"\npresets: {', '.join(names)}  (iclr26 run {p.slug} --preset NAME --set key=value; add --plan to "
          "check what a run needs first)")
    return 0


def _parse_sets(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        if "=" not in item:
            raise UserError(f"--set expects key=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _split_sets(slugs: list[str], overrides: dict[str, str]) -> dict[str, dict[str, str]]:
    """Per slug, the ``--set`` keys that are fields of its Config.

    With one slug every key must be one of its fields (``apply_overrides`` names the valid ones).
    With several, a key that is a field of none of them is an error naming all valid keys; a key
    that some lack is applied to those that have it, and one line says where it went.
    """
    from iclr26 import registry

    if len(slugs) == 1:
        return {slugs[0]: dict(overrides)}
    names = {s: [f.name for f in dataclasses.fields(registry.get(s).load().Config)] for s in slugs}
    valid = sorted({n for ns in names.values() for n in ns})
    for key in overrides:
        has = [s for s in slugs if key in names[s]]
        if not has:
            close = difflib.get_close_matches(key, valid, n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise UserError(f"--set {key}: not a config field of any of {', '.join(slugs)}{hint}; "
                            f"valid keys: {', '.join(valid)}")
        lacking = [s for s in slugs if s not in has]
        if lacking:
            print(f"--set {key}: applied to {', '.join(has)}; not a field of {', '.join(lacking)}", flush=True)
    return {s: {k: v for k, v in overrides.items() if k in names[s]} for s in slugs}


def _print_claims(claims: list[dict]) -> None:
    from iclr26.claims import claim_kind
    from iclr26.report import CLAIM_HEADER, claims_table_rows

    paper = [c for c in claims if claim_kind(c["name"], c.get("statement", "")) == "paper"]
    checks = [c for c in claims if c not in paper]
    rows = claims_table_rows(paper + checks)
    hdr = CLAIM_HEADER[:5]
    w = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(hdr)]
    print("  " + "  ".join(f"{h:<{w[i]}}" for i, h in enumerate(hdr)) + "  statement")
    for i, r in enumerate(rows):
        if i == len(paper) and checks:
            print("  -- controls and sanity checks --")
        print("  " + "  ".join(f"{r[j]:<{w[j]}}" for j in range(5)) + f"  {r[5]}")


def _print_summary(rows: list[dict]) -> None:
    """The one table at the end of a multi-paper run, then one loud line per missing asset or failure."""
    from iclr26.report import COUNTS_TEXT

    header = ["paper", "headline", "status", f"gated paper claims ({COUNTS_TEXT})", "reported only",
              "controls & sanity held", "wall s", "run dir"]
    table = [[r["slug"], r.get("headline", "-"), r["status"], r.get("held", "-"), r.get("reported", "-"),
              r.get("checks", "-"), r.get("wall", "-"), r.get("dir", "-")] for r in rows]
    w = [max([len(h)] + [len(t[i]) for t in table]) for i, h in enumerate(header)]
    print("\nsummary:")
    print("  " + "  ".join(f"{h:<{w[i]}}" for i, h in enumerate(header)).rstrip())
    for t in table:
        print("  " + "  ".join(f"{c:<{w[i]}}" for i, c in enumerate(t)).rstrip())
    for r in rows:
        for line in r.get("loud", []):
            print(f"  !! {r['slug']}: {line}")


def _cmd_run(args: argparse.Namespace) -> int:
    from iclr26 import registry
    from iclr26.core.device import resolve_device
    from iclr26.core.errors import MissingAssetError
    from iclr26.engine import build_config, run_paper
    from iclr26.report import COUNTS_TEXT, headline_text, missing_asset_lines, summary_counts, write_report
    from iclr26.runs import check_out_dir

    slugs = registry.implemented() if args.slugs == ["all"] else list(dict.fromkeys(args.slugs))
    # validate everything before any work starts: slugs, presets, --set keys and values, device, --out
    for slug in slugs:
        registry.get(slug).load()
    per_slug = _split_sets(slugs, _parse_sets(args.set))
    configs = {slug: build_config(slug, args.preset, per_slug[slug]) for slug in slugs}
    resolve_device(args.device)
    if args.plan:
        return _print_plans(slugs, args, per_slug)
    check_out_dir(args.out)
    many = len(slugs) > 1
    run_dirs, rows, failures = [], [], 0
    for slug in slugs:
        print(f"== {slug} (preset {args.preset}) ==", flush=True)
        try:
            run_dir, result = run_paper(slug, preset=args.preset, out=args.out, cfg=configs[slug],
                                        seed=args.seed, device=args.device, threads=args.threads,
                                        workers=args.workers, seeds=args.seeds)
        except KeyboardInterrupt:
            raise
        except MissingAssetError as e:
            if not many:
                raise
            print(f"  MISSING ASSET: {e}", flush=True)
            rows.append({"slug": slug, "status": "MISSING ASSET", "loud": [f"MISSING ASSET: {e}"]})
            continue
        except Exception as e:  # one paper failing must not lose the others
            if not many:
                raise
            if not isinstance(e, UserError):
                traceback.print_exc()
            print(f"  FAILED: {type(e).__name__}: {e}", flush=True)
            rows.append({"slug": slug, "status": "FAILED", "loud": [f"FAILED: {type(e).__name__}: {e}"]})
            continue
        run_dirs.append(run_dir)
        claims = [c.to_dict() for c in result.claims]
        _print_claims(claims)
        n = summary_counts(claims)
        failures += n.gated_failed > 0 and args.preset != "smoke"
        wall = result.metrics["wall_time_s"]
        data = {"claims": json.loads((run_dir / "claims.json").read_text())}
        head = headline_text(data)
        print(f"  headline {head} · gated paper claims ({COUNTS_TEXT}): {n.paper_text()}, "
              f"{n.paper_reported} reported only · controls & sanity held: {n.checks_text()} · wall {wall:.1f} s · "
              f"run dir: {run_dir}", flush=True)
        env = json.loads((run_dir / "env.json").read_text())
        loud = missing_asset_lines(env.get("missing_assets") or [])
        if args.preset == "default" and args.seed == 0 and args.seeds is None and not per_slug[slug]:
            # the run the README's status table declares: say whether this machine gave the same verdicts
            from iclr26.claims import check_expected

            diffs = check_expected(registry.get(slug).load(), result.claims)
            if diffs:
                loud.append(f"verdicts differ from the README's (EXPECTED): {'; '.join(diffs)}")
            else:
                print("  verdicts as the README declares them (EXPECTED)", flush=True)
        for line in loud:
            print(f"  !! {line}", flush=True)
        rows.append({"slug": slug, "status": "ok", "headline": head, "held": n.paper_text(), "reported": str(n.paper_reported), "checks": n.checks_text(),
                     "wall": f"{wall:.1f}", "dir": str(run_dir), "loud": loud})
    if many:
        _print_summary(rows)
    if run_dirs and (many or args.report):
        md, html = write_report(run_dirs, out=Path(args.out))
        print(f"\nreport: {html}\n        {md}")
    bad = [r["slug"] for r in rows if r["status"] != "ok"]
    if bad:
        print(f"iclr26: error: {len(bad)} of {len(slugs)} papers did not finish: {', '.join(bad)}",
              file=sys.stderr)
        return 1
    return 1 if (failures and args.strict) else 0


def _print_plans(slugs: list[str], args: argparse.Namespace, per_slug: dict[str, dict[str, str]]) -> int:
    """``run --plan``: each paper's plan; exit 0 when nothing is missing, 3 when something is. Writes nothing."""
    from iclr26.plan import plan_paper

    short = []
    for i, slug in enumerate(slugs):
        plan = plan_paper(slug, args.preset, per_slug[slug], seeds=args.seeds)
        print(("\n" if i else "") + plan.render(), flush=True)
        if plan.missing:
            short.append(slug)
    if len(slugs) > 1:
        print(f"\n{len(slugs) - len(short)} of {len(slugs)} ready" + (f"; missing something: {', '.join(short)}"
                                                                   if short else ""))
    return EXIT_MISSING if short else 0


def _cmd_report(args: argparse.Namespace) -> int:
    from iclr26.report import write_report

    md, html = write_report(args.dirs, out=args.out)
    print(f"report: {html}\n        {md}")
    return 0


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return v


def _cmd_status(args: argparse.Namespace) -> int:
    from iclr26.status import status_markdown, status_text

    print(status_markdown() if args.markdown else status_text())
    return 0


def _cmd_cache(args: argparse.Namespace) -> int:
    from iclr26.core.cache import clear_cache, list_cache

    if args.action == "list":
        rows = list_cache()
        for r in rows:
            print(f"{r['kind']:<10} {r['size_mb']:>8.1f} MB  {r['name']}")
        print(f"{len(rows)} cached artefact(s) in {args_cache_home()}")
        return 0
    n = clear_cache(kind=args.kind)
    print(f"removed {n} cached artefact(s) from {args_cache_home()}")
    return 0


def args_cache_home() -> str:
    from iclr26.core.paths import cache_home

    return str(cache_home())


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
    s.add_argument("--seed", type=int, default=0, help="first seed (default 0); ctx.seed is the only seed a run uses")
    s.add_argument("--seeds", type=_positive, default=None, metavar="N",
                   help="run N seeds (seed, seed+1, ...) and decide each claim over them (default: the preset's count)")
    s.add_argument("--threads", type=_positive, default=None, metavar="N",
                   help="torch/BLAS threads per process (default: the paper's workload rule, or ICLR26_THREADS)")
    s.add_argument("--workers", type=_positive, default=None, metavar="N",
                   help="worker processes for independent arms (default: the workload rule, or ICLR26_WORKERS)")
    s.add_argument("--device", default="auto", help="auto | cpu | cuda (default auto)")
    s.add_argument("--report", action="store_true", help="also write report.html for a single run")
    s.add_argument("--strict", action="store_true", help="exit 1 if a gated claim does not hold")
    s.add_argument("--plan", action="store_true",
                   help="run nothing: check the config, list the data, weights, packages and device the run needs "
                        "(with how to provide what is missing), estimate GPU memory and wall time; exit 0 when "
                        f"nothing is missing, {EXIT_MISSING} when something is")
    s.set_defaults(func=_cmd_run)
    s = sub.add_parser("status", help="each paper's headline and expected default-preset verdicts")
    s.add_argument("--markdown", action="store_true", help="print README's status table")
    s.set_defaults(func=_cmd_status)
    s = sub.add_parser("cache", help="list or clear cached trained artefacts (organisms, DDPMs)")
    s.add_argument("action", choices=["list", "clear"])
    s.add_argument("--kind", default=None, help="clear only this kind (organisms | diffusion)")
    s.set_defaults(func=_cmd_cache)
    s = sub.add_parser("report", help="report.md + self-contained report.html over run directories")
    s.add_argument("dirs", nargs="+", help="run directories")
    s.add_argument("--out", default=None, help="where to write (default: the parent folder of the first run; never inside a run)")
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
