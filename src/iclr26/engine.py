"""Run one paper's experiment into a fresh run directory (used by the CLI and the tests)."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from pathlib import Path
from typing import Any

import torch

from iclr26 import registry
from iclr26.core.config import apply_overrides, config_to_dict
from iclr26.core.device import resolve_device
from iclr26.core.errors import UserError
from iclr26.core.seed import seed_everything
from iclr26.runs import Result, RunContext, env_info, new_run_dir

log = logging.getLogger(__name__)


def build_config(slug: str, preset: str = "default", overrides: dict[str, Any] | None = None) -> Any:
    """Resolve ``Config()`` + preset + ``--set`` overrides for ``slug``."""
    paper = registry.get(slug)
    module = paper.load()
    presets = registry.presets(module)
    if preset not in presets:
        raise UserError(f"unknown preset {preset!r} for {slug}; allowed: {', '.join(presets)}")
    cfg = apply_overrides(module.Config(), presets[preset])
    if overrides:
        cfg = apply_overrides(cfg, overrides)
    return cfg


def run_paper(slug: str, *, preset: str = "default", out: str | Path = "runs",
              overrides: dict[str, Any] | None = None, seed: int = 0,
              device: str = "auto") -> tuple[Path, Result]:
    """Run ``slug`` at ``preset``; write config/metrics/claims/env/report into a new run dir."""
    paper = registry.get(slug)
    module = paper.load()
    cfg = build_config(slug, preset, overrides)
    dev = resolve_device(device)
    run_dir = new_run_dir(out, slug, preset)
    ctx = RunContext(run_dir, dev, seed, preset)
    ctx.write_json("config.json", {"slug": slug, "preset": preset, "seed": seed,
                                   "config": config_to_dict(cfg)})
    env = env_info(dev, seed)
    ctx.write_json("env.json", env)
    seed_everything(seed)
    t0 = time.perf_counter()
    result: Result = module.run(cfg, ctx)
    wall = time.perf_counter() - t0
    metrics = {k: _to_float(v) for k, v in result.metrics.items()}
    metrics["wall_time_s"] = wall
    ctx.write_json("metrics.json", metrics)
    ctx.write_json("claims.json", [c.to_dict() for c in result.claims])
    env["wall_time_s"] = wall
    env["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    ctx.write_json("env.json", env)
    from iclr26.report import write_run_markdown  # thin reporting layer, imported late

    write_run_markdown(run_dir, notes=result.notes, captions=dict(ctx._captions))
    return run_dir, dataclasses.replace(result, metrics=metrics)


def _to_float(v: Any) -> float:
    if isinstance(v, torch.Tensor):
        v = v.item()
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def load_run(run_dir: str | Path) -> dict[str, Any]:
    run_dir = Path(run_dir)
    if not (run_dir / "claims.json").exists():
        raise UserError(f"{run_dir} is not a finished iclr26 run directory (no claims.json)")
    out = {"dir": run_dir}
    for name in ("config", "metrics", "claims", "env"):
        p = run_dir / f"{name}.json"
        out[name] = json.loads(p.read_text()) if p.exists() else {}
    return out
