"""Interpretability core: hooks on named sites, activation capture, sparse dictionaries, SAE training, matching.

Submodules (each is the one home of what it defines):

- :mod:`~iclr26.interp.hooks` — read or replace a site's activation, hooks always removed;
- :mod:`~iclr26.interp.capture` — capture only the requested sites and positions, batched and streamed;
- :mod:`~iclr26.interp.sae` — :class:`SparseDictionary` (SAEs / transcoders), loaders, :func:`sae_stats`;
- :mod:`~iclr26.interp.train` — :class:`SAETrainer` (TopK + AuxK, ReLU + L1; single process or DDP);
- :mod:`~iclr26.interp.topk_kernel` — the sparse TopK autoencoder step used by the trainer;
- :mod:`~iclr26.interp.train_cli` — ``python -m iclr26.interp.train_cli`` (torchrun entry point);
- :mod:`~iclr26.interp.matching` — latent matching (exact Hungarian, sparse top-k) and SAE comparison;
- :mod:`~iclr26.interp.probes` — :class:`LinearProbe`, :class:`DiffMeansProbe`, AUROC / recall at a
  calibrated FPR / bootstrap intervals, label-shuffled and random-direction baselines;
- :mod:`~iclr26.interp.interventions` — diff-of-means directions, steering, directional / unit / head
  ablation and activation patching as composable context managers;
- :mod:`~iclr26.interp.sae_edit` — :func:`sae_edit` (edit latents, keep the error term; SAEs and transcoders)
  with the edit functions ``zero``, ``scale``, ``clamp``, ``add_scaled``.

The names below are the entry points; everything else is imported from its submodule.
"""

from iclr26.interp.capture import Capture, RunningMoments, capture, iter_batches
from iclr26.interp.hooks import eval_mode, hooks, register_replace_hook, register_site_hook, replace_sites
from iclr26.interp.interventions import (
    ablate_direction,
    ablate_heads,
    diff_of_means,
    edit_units,
    patch,
    steer,
)
from iclr26.interp.matching import compare_saes, match_exact, match_sparse
from iclr26.interp.probes import DiffMeansProbe, LinearProbe
from iclr26.interp.sae import (
    SparseDictionary,
    load_circuit_tracer_transcoder,
    load_dictionary_learning,
    load_gemmascope,
    load_gemmascope2,
    load_saelens,
    load_sparsify,
    sae_stats,
)
from iclr26.interp.sae_edit import sae_edit
from iclr26.interp.train import SAETrainer

__all__ = [
    "Capture",
    "RunningMoments",
    "capture",
    "iter_batches",
    "eval_mode",
    "hooks",
    "register_replace_hook",
    "register_site_hook",
    "replace_sites",
    "ablate_direction",
    "ablate_heads",
    "diff_of_means",
    "edit_units",
    "patch",
    "steer",
    "compare_saes",
    "match_exact",
    "match_sparse",
    "DiffMeansProbe",
    "LinearProbe",
    "SparseDictionary",
    "load_circuit_tracer_transcoder",
    "load_dictionary_learning",
    "load_gemmascope",
    "load_gemmascope2",
    "load_saelens",
    "load_sparsify",
    "sae_stats",
    "sae_edit",
    "SAETrainer",
]
