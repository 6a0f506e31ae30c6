"""Model merging over state dicts: task vectors, TA/TIES/WA/OPCM/WUDI baselines, NUFILT (P8).

NUFILT — *Null-Space Filtering for Data-Free Continual Model Merging* (ICLR 2026, arXiv 2509.21413).
Every function takes ``nn.Module``s or state dicts, merges only the parameters a name filter selects,
and never mutates its inputs. Continual use::

    merger = ContinualMerger(base, method="nufilt", layers=["attn", "fc1"])
    for ft in finetuned_models:
        merger.add(ft)
    merged = merger.model
"""

from iclr26.merging.baselines import (
    opcm_project,
    task_arithmetic,
    ties_merging,
    ties_vectors,
    wudi_merging,
    wudi_solve,
)
from iclr26.merging.continual import METHODS, ContinualMerger, continual_merge, continual_metrics
from iclr26.merging.nufilt import nufilt_merge, nufilt_step, null_space_projector, top_right_singular
from iclr26.merging.task_vectors import as_state_dict, task_vector, tv_norm

__all__ = [
    "METHODS",
    "ContinualMerger",
    "continual_merge",
    "continual_metrics",
    "nufilt_merge",
    "nufilt_step",
    "null_space_projector",
    "top_right_singular",
    "opcm_project",
    "task_arithmetic",
    "ties_merging",
    "ties_vectors",
    "wudi_merging",
    "wudi_solve",
    "as_state_dict",
    "task_vector",
    "tv_norm",
]
