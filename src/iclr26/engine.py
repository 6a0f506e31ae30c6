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
def _apply_thread_policy(cfg: Any) -> tuple[int, Callable[[], None]]:
    """THE single place where the engine sets CPU threads for a run; returns (threads, restore).

    Delegates to :func:`iclr26.core.threads.apply_thread_policy`: ``ICLR26_THREADS`` > the config's
    ``threads`` field > the experiment module's ``WORKLOAD`` > torch's current setting; the plan also
    fixes the worker processes ``parallel_map`` may use. ``restore()`` puts the previous settings back
    (in-process callers such as the tests run many papers one after another).
    """
    from iclr26.core.threads import apply_thread_policy

    return apply_thread_policy(cfg)


def run_paper(slug: str, *, preset: str = "default", out: str | Path = "runs",
              overrides: dict[str, Any] | None = None, seed: int = 0,
              device: str = "auto", cfg: Any = None) -> tuple[Path, Result]:
    """Run ``slug`` at ``preset``; return the finished run directory and the result.

    ``cfg`` (from :func:`build_config`) skips resolving the config again; it is checked either way.
    Nothing is created before the config, the device and ``out`` have been checked. The run is
    staged in ``out/.<slug>-<preset>.partial-<pid>`` and renamed to ``out/<slug>-<preset>[-N]``
    when it has finished; on any exception (Ctrl-C included) the staging folder is removed.
    """
    use_agg_backend()
    module = registry.get(slug).load()
    cfg = check_config(cfg) if cfg is not None else build_config(slug, preset, overrides)
    dev = resolve_device(device)
    stage = staging_dir(out, slug, preset)
    try:
        ctx = RunContext(stage, dev, seed, preset)
        ctx.write_json("config.json", {"slug": slug, "preset": preset, "seed": seed,
                                       "config": config_to_dict(cfg)})
        threads, restore_threads = _apply_thread_policy(cfg)
        try:
            env = env_info(dev, seed)
            env["threads"] = threads
            ctx.write_json("env.json", env)
            seed_everything(seed)
            t0 = time.perf_counter()
            c0 = time.process_time()
            result: Result = module.run(cfg, ctx)
            wall = time.perf_counter() - t0
            cpu = time.process_time() - c0
        finally:
            restore_threads()
        metrics = {k: _to_float(v) for k, v in result.metrics.items()}
        metrics["wall_time_s"] = wall
        ctx.write_json("metrics.json", metrics)
        ctx.write_json("claims.json", [c.to_dict() for c in result.claims])
        env["wall_time_s"] = wall
        env["process_cpu_time_s"] = cpu
        env["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        env["missing_assets"] = list(ctx.missing_assets)
        ctx.write_json("env.json", env)
        notes = "\n\n".join(n for n in [result.notes.strip(), *ctx.notes] if n)
        if notes:
            atomic_write_text(stage / "notes.md", notes + "\n")
        if ctx.captions:
            ctx.write_json("figures/captions.json", dict(ctx.captions))
        from iclr26.report import render_run_markdown  # thin reporting layer, imported late

        atomic_write_text(stage / "report.md", render_run_markdown(stage))
        run_dir = finalize_run_dir(stage, slug, preset)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return run_dir, dataclasses.replace(result, metrics=metrics)


def _to_float(v: Any) -> float:
    if isinstance(v, torch.Tensor):
        v = v.item()
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan
