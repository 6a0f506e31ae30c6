"""Prompt sets with planted duplicates for memorization experiments (P6, memorization-anisotropy).

Three kinds of "prompts" (learned condition ids) over a pool of small images (e.g. the 8x8 digits):

- ``mem``: one image each, repeated ``dup`` times in the training set, for each ``dup`` in ``dup_counts``
  (``n_per_dup`` prompts per count) — memorized by design;
- ``normal``: ``per_normal`` distinct images of one class each — ordinary, many-image prompts;
- ``narrow``: one seed image plus ``per_narrow - 1`` jittered variants (a +-1 pixel shift and Gaussian pixel
  noise) — narrow but novel prompts, which stress detectors that flag any low-variance condition.

Memorized images are never reused by other prompts; normal prompts draw distinct images of their class
(cycling through the class when prompts outnumber images).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from iclr26.core.errors import UserError
from iclr26.core.seed import make_generator


@dataclass
class PlantedPrompts:
    images: Tensor  # [N, H, W] training rows (duplicates repeated), values in [0, 1]
    prompt_ids: Tensor  # [N] long, the prompt of each row
    kind: list[str]  # [P] "mem" | "normal" | "narrow"
    dup: Tensor  # [P] long: duplication count of a memorized prompt's image (0 for other prompts)
    label: Tensor  # [P] int class of the prompt (of its image for mem / narrow)
    unique_images: Tensor  # [M, H*W] the distinct training images (nearest-neighbour reference)

    @property
    def n_prompts(self) -> int:
        return len(self.kind)


def planted_duplicate_prompts(
    X: Tensor,
    y: Tensor,
    *,
    dup_counts: list[int],
    n_per_dup: int,
    n_normal: int,
    per_normal: int,
    n_narrow: int,
    per_narrow: int,
    jitter_noise: float = 0.1,
    seed: int = 0,
) -> PlantedPrompts:
    """Build the prompt set described in the module docstring from images ``X`` [N, H, W] in [0, 1] and labels."""
    if X.ndim != 3 or y.shape != (X.shape[0],):
        raise UserError(f"X must be [N, H, W] and y [N]; got {tuple(X.shape)}, {tuple(y.shape)}")
    if any(d < 1 for d in dup_counts) or min(n_per_dup, n_normal, n_narrow) < 0 or min(per_normal, per_narrow) < 1:
        raise UserError("dup_counts must be >= 1, prompt counts >= 0 and images per prompt >= 1")
    n_mem = len(dup_counts) * n_per_dup
    if n_mem + n_narrow >= X.shape[0]:
        raise UserError(f"{n_mem} memorized + {n_narrow} narrow prompts need more than {X.shape[0]} images")
    g = make_generator(seed)
    perm = torch.randperm(X.shape[0], generator=g)
    mem_idx, seed_idx, rest = perm[:n_mem], perm[n_mem : n_mem + n_narrow], perm[n_mem + n_narrow :]
    rows, ids, kind, dup, label = [], [], [], [], []

    def add(imgs: Tensor, k: str, d: int, lab: int) -> None:
        ids.append(torch.full((imgs.shape[0],), len(kind), dtype=torch.long))
        rows.append(imgs)
        kind.append(k)
        dup.append(d)
        label.append(lab)

    for j, d in enumerate(dup_counts):
        for i in mem_idx[j * n_per_dup : (j + 1) * n_per_dup].tolist():
            add(X[i].expand(d, *X.shape[1:]).clone(), "mem", int(d), int(y[i]))
    classes = torch.unique(y[rest]).tolist()
    pools = {c: rest[y[rest] == c] for c in classes}
    cursor = dict.fromkeys(classes, 0)
    for i in range(n_normal):
        c = classes[i % len(classes)]
        pool = pools[c]
        take = torch.arange(cursor[c], cursor[c] + per_normal) % len(pool)
        cursor[c] += per_normal
        add(X[pool[take]], "normal", 0, int(c))
    H, W = X.shape[1:]
    for i in seed_idx.tolist():
        base = X[i]
        variants = [base]
        for _ in range(per_narrow - 1):
            dx, dy = torch.randint(-1, 2, (2,), generator=g).tolist()
            v = torch.roll(base, (dx, dy), (0, 1)) + jitter_noise * torch.randn(H, W, generator=g)
            variants.append(v.clamp(0, 1))
        add(torch.stack(variants), "narrow", 0, int(y[i]))
    images = torch.cat(rows)
    uniq = torch.unique(images.reshape(images.shape[0], -1), dim=0)
    return PlantedPrompts(images, torch.cat(ids), kind, torch.tensor(dup), torch.tensor(label), uniq)
