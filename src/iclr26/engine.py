"""Run one paper's experiment into a fresh run directory (used by the CLI and the tests).

The engine owns the run mechanics: it resolves and checks the config before anything is written,
sets the matplotlib backend and the thread policy, stages the run in a hidden folder that gets its
final name only when the run has finished (an interrupted or failed run leaves nothing under a
final name), and writes config/env/metrics/claims, notes, figure captions and ``report.md``.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from iclr26 import registry
from iclr26.core.config import apply_overrides, check_config, config_to_dict
from iclr26.core.device import resolve_device
from iclr26.core.errors import UserError
from iclr26.core.io import atomic_write_text
from iclr26.core.progress import quiet_library_bars
from iclr26.core.seed import seed_everything
from iclr26.runs import Result, RunContext, env_info, finalize_run_dir, staging_dir


def use_agg_backend() -> None:
    """Render figures off-screen: set matplotlib's Agg backend before any experiment imports pyplot."""
    import matplotlib

    if matplotlib.get_backend().lower() != "agg":
        matplotlib.use("Agg", force=True)


def build_config(slug: str, preset: str = "default", overrides: dict[str, Any] | None = None) -> Any:
    """Resolve ``Config()`` + preset + ``--set`` overrides for ``slug`` and check every field.

    Raises a one-line :class:`UserError` for an unknown preset or key, an ill-typed value, a value
    outside a field's declared range, or a violated cross-field constraint (``Config.validate``).
    """
    use_agg_backend()
    module = registry.get(slug).load()
    presets = registry.presets(module)
    if preset not in presets:
        raise UserError(f"unknown preset {preset!r} for {slug}; allowed: {', '.join(presets)}")
    cfg = apply_overrides(module.Config(), presets[preset])
    if overrides:
        cfg = apply_overrides(cfg, overrides)
    return check_config(cfg)


# ---------------------------------------------------------------------------------- THREAD POLICY
def _apply_thread_policy(cfg: Any, workload: str | None = None, *, threads: int | None = None,
                         workers: int | None = None) -> tuple[int, Callable[[], None]]:
    """THE single place where the engine sets CPU threads for a run; returns (threads, restore).

    Delegates to :func:`iclr26.core.threads.apply_thread_policy`: ``--threads`` > ``ICLR26_THREADS`` > the
    config's ``threads`` field > the experiment module's ``WORKLOAD`` (passed here explicitly) > torch's
    current setting; the plan also fixes the worker processes ``parallel_map`` may use (``--workers`` >
    ``ICLR26_WORKERS`` > the workload's rule). ``restore()`` puts the previous settings back (in-process
    callers such as the tests run many papers one after another).
    """
    from iclr26.core.threads import apply_thread_policy, plan_for_config

    return apply_thread_policy(plan_for_config(cfg, workload, threads=threads, workers=workers))


def preset_seeds(module: Any, preset: str) -> int:
    """How many seeds a preset runs by default: the module's ``SEEDS[preset]``, else 1."""
    n = int(getattr(module, "SEEDS", {}).get(preset, 1))
    if n < 1:
        raise UserError(f"{module.__name__}.SEEDS[{preset!r}] = {n}: must be >= 1")
    return n


def run_paper(slug: str, *, preset: str = "default", out: str | Path = "runs",
              overrides: dict[str, Any] | None = None, seed: int = 0,
              device: str = "auto", cfg: Any = None, threads: int | None = None,
              workers: int | None = None, seeds: int | None = None) -> tuple[Path, Result]:
    """Run ``slug`` at ``preset``; return the finished run directory and the result.

    ``cfg`` (from :func:`build_config`) skips resolving the config again; it is checked either way.
    ``seeds`` (default: the preset's declared count, :func:`preset_seeds`) runs the experiment at seeds
    ``seed, seed + 1, ...``; each seed's files go to ``seeds/<s>/`` and the claims are combined over seeds
    (mean and t-interval, :func:`iclr26.claims.combine_seeds`). ``ctx.seed`` is the only seed an
    experiment may use. Nothing is created before the config, the device and ``out`` have been checked.
    The run is staged in ``out/.<slug>-<preset>.partial-<pid>`` and renamed to ``out/<slug>-<preset>[-N]``
    when it has finished; on any exception (Ctrl-C included) the staging folder is removed.
    """
    from iclr26.claims import apply_seed_spread, combine_seeds

    use_agg_backend()
    quiet_library_bars()
    module = registry.get(slug).load()
    cfg = check_config(cfg) if cfg is not None else build_config(slug, preset, overrides)
    n_seeds = preset_seeds(module, preset) if seeds is None else int(seeds)
    if n_seeds < 1:
        raise UserError(f"--seeds {seeds}: expected a positive integer")
    dev = resolve_device(device)
    stage = staging_dir(out, slug, preset)
    try:
        seed_list = [seed + i for i in range(n_seeds)]
        ctx_main = RunContext(stage, dev, seed, preset)
        ctx_main.write_json("config.json", {"slug": slug, "preset": preset, "seed": seed, "seeds": seed_list,
                                            "config": config_to_dict(cfg)})
        n_threads, restore_threads = _apply_thread_policy(cfg, getattr(module, "WORKLOAD", None),
                                                          threads=threads, workers=workers)
        results: list[Result] = []
        ctxs: list[RunContext] = []
        try:
            env = env_info(dev, seed)
            env["threads"] = n_threads
            env["seeds"] = seed_list
            env["lock"] = _lock_name()
            ctx_main.write_json("env.json", env)
            t0 = time.perf_counter()
            c0 = time.process_time()
            from iclr26.core.threads import active_plan

            plan = active_plan()
            if n_seeds > 1 and n_threads == 1 and plan is not None and plan.workers > 1:
                # seeds in parallel where that pays: single-threaded runs, one worker process per seed (arms
                # inside a seed then run serially in their worker; results are identical to the serial path)
                from iclr26.core.parallel import parallel_map

                home = str(Path(module.__file__).resolve().parent)
                jobs = [((module.__name__, home), cfg, str(stage / "seeds" / str(s)), str(dev), s, preset)
                        for s in seed_list]
                for r, ctx in parallel_map(_seed_job, jobs, workers=min(plan.workers, n_seeds), threads=1,
                                           desc="seeds"):
                    results.append(r)
                    ctxs.append(ctx)
            else:
                for s in seed_list:
                    ctx = ctx_main if n_seeds == 1 else RunContext(stage / "seeds" / str(s), dev, s, preset)
                    seed_everything(s)
                    results.append(module.run(cfg, ctx))
                    ctxs.append(ctx)
            wall = time.perf_counter() - t0
            cpu = time.process_time() - c0
        finally:
            restore_threads()
        spread = getattr(module, "SEED_SPREAD", {})  # measured seed spreads (docs) let one seed decide
        claims = combine_seeds([apply_seed_spread(r.claims, spread) for r in results])
        metrics = _combine_metrics([r.metrics for r in results])
        metrics["wall_time_s"] = wall
        _check_headline(module, claims)
        if n_seeds > 1:
            for ctx, r in zip(ctxs, results, strict=True):
                ctx.write_json("metrics.json", {k: _to_float(v) for k, v in r.metrics.items()})
                ctx.write_json("claims.json", [c.to_dict() for c in r.claims])
                if ctx.captions:
                    ctx.write_json("figures/captions.json", dict(ctx.captions))
            first = ctxs[0]
            for png in first.figures_dir.glob("*.png"):  # the first seed's figures stand for the run
                shutil.copy2(png, ctx_main.figures_dir / png.name)
            ctx_main.captions.update(first.captions)
            ctx_main.notes.extend(first.notes)
            for ctx in ctxs:
                for m in ctx.missing_assets:
                    ctx_main.note_missing_asset(m["name"], m["install"], skipped=m["skipped"])
        ctx_main.write_json("metrics.json", metrics)
        ctx_main.write_json("claims.json", {"headline": getattr(module, "HEADLINE", ""),
                                            "claims": [c.to_dict() for c in claims]})
        env["wall_time_s"] = wall
        env["process_cpu_time_s"] = cpu
        env["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        env["missing_assets"] = list(ctx_main.missing_assets)
        env["cache"] = ctxs[0].cache if n_seeds == 1 else {str(s): c.cache for s, c in zip(seed_list, ctxs, strict=True)}
        ctx_main.write_json("env.json", env)
        # once each: several experiments both return a note and add it to ctx (reports printed it twice)
        notes = "\n\n".join(dict.fromkeys(n.strip() for n in [results[0].notes, *ctx_main.notes] if n.strip()))
        if notes:
            atomic_write_text(stage / "notes.md", notes + "\n")
        if ctx_main.captions:
            ctx_main.write_json("figures/captions.json", dict(ctx_main.captions))
        from iclr26.report import render_run_markdown  # thin reporting layer, imported late

        atomic_write_text(stage / "report.md", render_run_markdown(stage))
        run_dir = finalize_run_dir(stage, slug, preset)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return run_dir, dataclasses.replace(results[0], metrics=metrics, claims=claims)


def _seed_job(job: tuple) -> tuple[Result, RunContext]:
    """One seed of a multi-seed run, in a worker process: the experiment's run at that seed."""
    import importlib
    import sys

    (modname, home), cfg, folder, dev, s, preset = job
    use_agg_backend()
    try:
        module = importlib.import_module(modname)
    except ModuleNotFoundError:  # an experiment module outside the package (a user's own, a test's)
        sys.path.insert(0, home)
        module = importlib.import_module(modname)
    ctx = RunContext(Path(folder), torch.device(dev), s, preset)
    seed_everything(s)
    return module.run(cfg, ctx), ctx


def _check_headline(module: Any, claims: list) -> None:
    """A module's ``HEADLINE`` must name one of its gated paper claims (the abstract's central statement)."""
    head = getattr(module, "HEADLINE", None)
    if head is None:
        return
    names = {c.name for c in claims if c.gated and c.kind == "paper"}
    if head not in names:
        raise RuntimeError(f"{module.__name__}.HEADLINE = {head!r} is not one of its gated paper claims "
                           f"({', '.join(sorted(names))})")


def _combine_metrics(per_seed: list[dict[str, Any]]) -> dict[str, float]:
    """Flat metrics of one seed, or the mean over seeds (each seed's own stay in ``seeds/<s>/metrics.json``)."""
    import numpy as np

    if len(per_seed) == 1:
        return {k: _to_float(v) for k, v in per_seed[0].items()}
    keys = [k for k in per_seed[0] if all(k in m for m in per_seed)]
    return {k: float(np.mean([_to_float(m[k]) for m in per_seed])) for k in keys}


def _lock_name() -> dict[str, Any] | None:
    """Which pinned environment this run is in: the constraints file (``ICLR26_LOCK`` from the Makefile, else
    the repository's ``constraints.txt`` when iclr26 runs from a checkout) and how many of its pins the
    installed packages match, with the first few that differ."""
    import hashlib
    import importlib.metadata as md
    import os

    path = Path(__file__).resolve().parents[2] / "constraints.txt"
    if not path.is_file():
        return {"file": os.environ.get("ICLR26_LOCK") or None, "matches": None}
    pins = [ln.split("==", 1) for ln in path.read_text().splitlines() if "==" in ln and not ln.startswith("#")]
    differ = []
    for name, want in pins:
        try:
            have = md.version(name)
        except md.PackageNotFoundError:
            have = None
        if have != want.strip():
            differ.append(f"{name} {have or 'missing'} (pinned {want.strip()})")
    sha = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    return {"file": os.environ.get("ICLR26_LOCK") or f"constraints.txt@{sha}",
            "matches": f"{len(pins) - len(differ)}/{len(pins)}", "differ": differ[:10]}


def _to_float(v: Any) -> float:
    if isinstance(v, torch.Tensor):
        v = v.item()
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan
