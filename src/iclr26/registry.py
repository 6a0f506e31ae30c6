"""The nineteen papers: slug -> metadata and (for implemented ones) the experiment module.

Experiment modules are imported lazily so that ``iclr26 list`` stays fast and a paper's heavy
dependencies load only when that paper runs. An experiment module defines:

- ``Config``: a dataclass whose fields use :func:`iclr26.core.param` (default + one-line doc);
- ``PRESETS``: ``{"smoke": {...}, "default": {...}, "paper": {...}}`` overrides of ``Config``;
- ``DESCRIPTION``: a few lines on what the reproduction does;
- ``run(cfg, ctx) -> Result``;
- ``plan(cfg) -> dict``: what a run with ``cfg`` needs and roughly costs, for ``iclr26 run --plan``
  (:mod:`iclr26.plan`).

Each implemented :class:`Paper` also names its ``library`` modules (the reusable code the experiment
calls), so that a slug leads to its code: ``iclr26 show <slug>`` prints them, and
``tests/test_common.py`` checks that they import and cover every library module the experiment uses.
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass
from types import ModuleType

from iclr26.core.errors import UserError

PRESET_NAMES = ("smoke", "default", "paper")


@dataclass(frozen=True)
class Paper:
    num: str
    slug: str
    area: str
    title: str
    id: str
    module: str | None = None  # dotted experiment module when implemented
    library: tuple[str, ...] = ()  # dotted library modules the experiment is built on

    @property
    def status(self) -> str:
        return "implemented" if self.module else "planned"

    @property
    def docs(self) -> str:
        return f"docs/{self.slug}.md"

    def load(self) -> ModuleType:
        if self.module is None:
            raise UserError(f"{self.slug} is planned, not implemented yet; implemented: {', '.join(implemented())}")
        return importlib.import_module(self.module)


def _exp(slug: str) -> str:
    return "iclr26.experiments." + slug.replace("-", "_")


PAPERS: tuple[Paper, ...] = (
    Paper("P1", "strategic-dishonesty", "interp",
          "Strategic Dishonesty Can Undermine AI Safety Evaluations of Frontier LLMs", "arXiv 2509.18058",
          module=_exp("strategic-dishonesty"),
          library=("iclr26.interp.probes", "iclr26.interp.interventions", "iclr26.interp.capture",
                   "iclr26.lm.train", "iclr26.lm.organism", "iclr26.lm.loading", "iclr26.data.dishonesty",
                   "iclr26.data.statements")),
    Paper("P2", "humof", "motion",
          "HUMOF: Human Motion Forecasting in Interactive Social Scenes", "arXiv 2506.03753",
          module=_exp("humof"),
          library=("iclr26.motion.humof", "iclr26.data.scenes", "iclr26.data.mocap", "iclr26.motion.dct")),
    Paper("P3", "composable-subnetworks", "sparsity",
          "Composable Sparse Subnetworks via Maximum-Entropy Principle", "OpenReview IHwx5ioIP2",
          module=_exp("composable-subnetworks"),
          library=("iclr26.sparsity.subnetworks", "iclr26.data.images")),
    Paper("P4", "mi-ue", "poisoning",
          "Why Do Unlearnable Examples Work: A Novel Perspective of Mutual Information", "arXiv 2603.03725",
          module=_exp("mi-ue"),
          library=("iclr26.poisoning.unlearnable", "iclr26.poisoning.defenses", "iclr26.poisoning.mi",
                   "iclr26.poisoning.models", "iclr26.poisoning.training", "iclr26.data.images")),
    Paper("P5", "culture-neurons", "interp",
          "Neuron-Level Analysis of Cultural Understanding in Large Language Models", "arXiv 2510.08284",
          module=_exp("culture-neurons"),
          library=("iclr26.interp.unit_scores", "iclr26.interp.attribution", "iclr26.interp.interventions",
                   "iclr26.lm.train", "iclr26.lm.organism", "iclr26.lm.loading", "iclr26.data.culture")),
    Paper("P6", "memorization-anisotropy", "diffusion",
          "Detecting and Mitigating Memorization in Diffusion Models through Anisotropy of the "
          "Log-Probability", "arXiv 2601.20642",
          module=_exp("memorization-anisotropy"),
          library=("iclr26.diffusion.memorization", "iclr26.diffusion.ddpm", "iclr26.data.planted_duplicates",
                   "iclr26.data.images", "iclr26.interp.probes")),
    Paper("P7", "role-modality-attacks", "interp",
          "Misaligned Roles, Misplaced Images: Structural Input Perturbations Expose Multimodal "
          "Alignment Blind Spots", "arXiv 2504.03735",
          module=_exp("role-modality-attacks"),
          library=("iclr26.lm.chat_structure", "iclr26.interp.interventions", "iclr26.interp.capture",
                   "iclr26.lm.train", "iclr26.lm.organism")),
    Paper("P8", "nufilt", "merging",
          "Null-Space Filtering for Data-Free Continual Model Merging", "arXiv 2509.21413",
          module=_exp("nufilt"),
          library=("iclr26.merging.nufilt", "iclr26.merging.continual", "iclr26.merging.baselines",
                   "iclr26.merging.task_vectors", "iclr26.data.subspace_tasks", "iclr26.data.images")),
    Paper("P9", "degenerate-explanations", "graphs",
          "GNN Explanations that do not Explain and How to find Them", "arXiv 2601.20815",
          module=_exp("degenerate-explanations"),
          library=("iclr26.graphs.segnn", "iclr26.graphs.faithfulness", "iclr26.data.graphs")),
    Paper("P10", "sae-bias-latents", "interp",
          "Can SAEs reveal and mitigate racial biases of LLMs in healthcare?", "arXiv 2511.00177",
          module=_exp("sae-bias-latents"),
          library=("iclr26.interp.latents", "iclr26.interp.latent_attribution", "iclr26.interp.sae_edit",
                   "iclr26.interp.train", "iclr26.interp.sae", "iclr26.interp.attribution", "iclr26.interp.capture",
                   "iclr26.lm.train", "iclr26.lm.organism", "iclr26.data.clinical_notes")),
    Paper("P11", "latent-planning", "interp", "Latent Planning Emerges with Scale", "arXiv 2604.12493",
          module=_exp("latent-planning"),
          library=("iclr26.interp.planning", "iclr26.interp.sae_edit", "iclr26.interp.capture",
                   "iclr26.data.planning", "iclr26.data.text", "iclr26.lm.organism", "iclr26.lm.train",
                   "iclr26.lm.loading")),
    Paper("P12", "reasoning-misalignment", "interp",
          "When Thinking Backfires: Mechanistic Insights Into Reasoning-Induced Misalignment",
          "arXiv 2509.00544",
          module=_exp("reasoning-misalignment"),
          library=("iclr26.interp.neurons", "iclr26.interp.interventions", "iclr26.interp.capture",
                   "iclr26.lm.train", "iclr26.lm.organism", "iclr26.lm.loading", "iclr26.data.reasoning")),
    Paper("P13", "functional-rectified-flow", "flows",
          "Flow Straight and Fast in Hilbert Space: Functional Rectified Flow", "arXiv 2509.10384",
          module=_exp("functional-rectified-flow"),
          library=("iclr26.flows.functional", "iclr26.flows.diffusion", "iclr26.flows.fno", "iclr26.flows.priors",
                   "iclr26.flows.core")),
    Paper("P14", "ampo", "rl",
          "Adaptive Social Learning via Mode Policy Optimization for Language Agents", "arXiv 2505.02156",
          module=_exp("ampo"),
          library=("iclr26.rl.advantages", "iclr26.rl.mode_policy", "iclr26.rl.negotiation", "iclr26.rl.reward")),
    Paper("P15", "rangeformer", "architectures",
          "RangeFormer: transformers for linear algebra (title not confirmed)", "OpenReview GBkRMi3qjD",
          module=_exp("rangeformer"),
          library=("iclr26.architectures.rangeformer", "iclr26.data.spd_matrices")),
    Paper("P16", "fdfi", "flows", "Flow-Disentangled Feature Importance", "OpenReview Fx8AtzGlTS",
          module=_exp("fdfi"),
          library=("iclr26.flows.fdfi", "iclr26.flows.fdfi_stats", "iclr26.flows.fdfi_baselines",
                   "iclr26.flows.core", "iclr26.data.feature_importance")),
    Paper("P17", "hyper-set", "architectures",
          "Hyper-SET: Designing Transformers via Hyperspherical Energy Minimization", "arXiv 2502.11646",
          module=_exp("hyper-set"),
          library=("iclr26.architectures.hyper_set", "iclr26.architectures.vit", "iclr26.data.sudoku",
                   "iclr26.data.images")),
    Paper("P18", "ptq-meta-weighting", "diffusion",
          "Beyond Uniformity: Sample and Frequency Meta Weighting for Post-Training Quantization of "
          "Diffusion Models", "OpenReview FDdOD3qwS7",
          module=_exp("ptq-meta-weighting"),
          library=("iclr26.diffusion.ptq", "iclr26.diffusion.ddpm", "iclr26.data.images")),
    Paper("P19", "sae-seeds", "interp",
          "Sparse Autoencoders Trained on the Same Data Learn Different Features", "arXiv 2501.16615",
          module=_exp("sae-seeds"),
          library=("iclr26.interp.sae", "iclr26.interp.train", "iclr26.interp.topk_kernel",
                   "iclr26.interp.matching", "iclr26.interp.capture", "iclr26.lm.loading",
                   "iclr26.data.sparse_dictionary", "iclr26.data.text")),
)

_BY_SLUG = {p.slug: p for p in PAPERS}


def get(slug: str) -> Paper:
    try:
        return _BY_SLUG[slug]
    except KeyError:
        close = difflib.get_close_matches(slug, list(_BY_SLUG), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else "; see `iclr26 list`"
        raise UserError(f"unknown paper slug {slug!r}{hint}") from None


def implemented() -> list[str]:
    return [p.slug for p in PAPERS if p.module]


def presets(module: ModuleType) -> dict[str, dict]:
    pre = dict(getattr(module, "PRESETS", {}))
    for name in PRESET_NAMES:
        pre.setdefault(name, {})
    return pre
