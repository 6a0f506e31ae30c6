"""Run directories and the result types every experiment returns.

A run directory holds ``config.json``, ``metrics.json``, ``claims.json``, ``env.json``,
``figures/*.png`` (with ``figures/captions.json``), ``notes.md`` and ``report.md``. It is never
overwritten: an existing name gets a suffix. A run writes into a hidden staging folder
``.<slug>-<preset>.partial-<pid>`` that is renamed to its final name only when the run has
finished, so an interrupted run leaves nothing under a final name.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

# claims live in iclr26.claims (decided there with an interval and a null arm); re-exported for experiments
from iclr26.claims import CLAIM_KINDS, Claim, claim, claim_kind  # noqa: E402,F401
from iclr26.core.errors import UserError
from iclr26.core.io import atomic_path, atomic_write_text
from iclr26.stats import Est, exact  # noqa: E402,F401


@dataclass
class Result:
    """What ``run(cfg, ctx)`` returns: flat numeric metrics, claims, and free-text notes."""

    metrics: dict[str, float]
    claims: list[Claim]
    notes: str = ""


class RunContext:
    """Handed to an experiment's ``run``: where to write, which device, which seed.

    Besides files (:meth:`save_figure`, :meth:`write_json`) an experiment records here what the
    engine writes into the run directory when the run finishes: figure ``captions``, free-text
    ``notes`` (:meth:`add_note`) and ``missing_assets`` (:meth:`note_missing_asset`) - an optional
    asset the run had to do without, shown loudly in the summary table and the report.
    ``run_dir`` is a staging folder during the run; it gets its final name only when the run ends.
    """

    def __init__(self, run_dir: Path, device: torch.device, seed: int, preset: str):
        self.run_dir = Path(run_dir)
        self.device = device
        self.seed = seed
        self.preset = preset
        self.figures_dir = self.run_dir / "figures"
        self.figures_dir.mkdir(parents=True, exist_ok=True)
        self.figures: list[str] = []
        self.captions: dict[str, str] = {}
        self.notes: list[str] = []
        self.missing_assets: list[dict[str, str]] = []
        self.cache: dict[str, dict[str, Any]] = {}

    def save_figure(self, fig: Any, name: str, caption: str = "") -> Path:
        """Save a matplotlib figure as ``figures/<name>.png`` (atomic) and close it."""
        import matplotlib.pyplot as plt

        path = self.figures_dir / f"{name}.png"
        try:
            with atomic_path(path) as tmp:
                fig.savefig(tmp, dpi=110, bbox_inches="tight")
        finally:
            plt.close(fig)
        self.figures.append(name)
        if caption:
            self.captions[name] = caption
        return path

    def add_note(self, text: str) -> None:
        """Append a free-text note to the run's ``notes.md`` (joined with the ``Result.notes``)."""
        if text.strip():
            self.notes.append(text.strip())

    def note_missing_asset(self, name: str, install: str, *, skipped: str = "") -> None:
        """Record that optional asset ``name`` was absent (``install``: the command that installs it).

        ``skipped`` says what the run left out or replaced because of it. The engine stores the list
        in ``env.json`` under ``missing_assets``; the summary table and the report show it loudly.
        """
        entry = {"name": name, "install": install, "skipped": skipped}
        if entry not in self.missing_assets:  # once per asset and consequence, however often it was tried
            self.missing_assets.append(entry)

    def note_cache(self, name: str, hit: bool, *, build_seconds: float | None = None) -> None:
        """Record whether artifact ``name`` (a trained organism, a DDPM) came from the cache, and what building
        it took. The engine writes this into ``env.json`` under ``cache``: it describes the machine's state, not
        the result, so it stays out of ``metrics.json`` (a result must not depend on what an earlier run left)."""
        self.cache[name] = {"hit": bool(hit)} | ({} if build_seconds is None else {"build_seconds": float(build_seconds)})

    def write_json(self, name: str, data: Any) -> Path:
        path = self.run_dir / name
        atomic_write_text(path, json.dumps(data, indent=2, default=_json_default))
        return path


def _json_default(o: Any) -> Any:
    if hasattr(o, "tolist"):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    return str(o)


def check_out_dir(out: str | Path) -> Path:
    """Create ``out`` if needed and check that it is writable (one-line ``UserError`` if not)."""
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise UserError(f"--out {out}: not a writable directory ({e.strerror or e})") from None
    return out


def staging_dir(out: str | Path, slug: str, preset: str) -> Path:
    """Create the hidden folder ``out/.<slug>-<preset>.partial-<pid>[-N]`` a run writes into.

    A finished run is renamed by :func:`finalize_run_dir`; a run killed hard leaves only this
    clearly marked hidden folder, which ``report`` and ``run all`` never look at.
    """
    out = check_out_dir(out)
    base = f".{slug}-{preset}{PARTIAL_MARK}{os.getpid()}"
    for i in range(0, 10_000):
        path = out / (base if i == 0 else f"{base}-{i}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise UserError(f"too many unfinished runs named {base} in {out}")


PARTIAL_MARK = ".partial-"


def finalize_run_dir(stage: Path, slug: str, preset: str) -> Path:
    """Give the finished staging folder its final name ``<slug>-<preset>[-N]`` beside it.

    The final name is reserved with ``mkdir`` (so two processes never pick the same one) and the
    staging folder renamed onto the empty reservation, atomically; nothing existing is touched.
    """
    stage = Path(stage)
    final = new_run_dir(stage.parent, slug, preset)
    os.replace(stage, final)
    return final


def new_run_dir(out: str | Path, slug: str, preset: str) -> Path:
    """Create a fresh directory ``out/<slug>-<preset>[-N]``; never reuse an existing one."""
    out = check_out_dir(out)
    base = f"{slug}-{preset}"
    for i in range(0, 10_000):
        name = base if i == 0 else f"{base}-{i}"
        path = out / name
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise UserError(f"too many runs named {base} in {out}")


def git_sha() -> str | None:
    try:
        here = Path(__file__).resolve().parent
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def env_info(device: torch.device, seed: int) -> dict[str, Any]:
    import numpy
    import scipy
    import sklearn

    import iclr26

    info: dict[str, Any] = {
        "iclr26": iclr26.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "sklearn": sklearn.__version__,
        "device": str(device),
        "cuda": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "seed": seed,
        "git_sha": git_sha(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    try:
        import transformers

        info["transformers"] = transformers.__version__
    except ImportError:
        pass
    return info
