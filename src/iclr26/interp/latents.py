"""Finding the dictionary latents behind a behaviour: L1-logistic discovery and logit-lens feature choice.

- :func:`max_pooled_latents` — per example, the max over chosen tokens of each latent of an SAE at a site
  (encoded inside the capture sink, so only ``[N, n_latents]`` is kept). Used by "Can SAEs reveal and mitigate
  racial biases of LLMs in healthcare?" (P10: max over the note's tokens, BOS skipped).
- :func:`discover_latents` — standardise, fit an L1 logistic regression (scikit-learn, liblinear), rank latents by
  |coefficient|; returns the ranking and the held-out AUROC when a test split is given.
- :func:`logit_lens_latents` — the latents whose decoder direction, read through the unembedding, most raises
  (or lowers) given tokens: the output-logit criterion of "Latent Planning Emerges with Scale" (P11) for choosing
  planning features of a word.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from iclr26.core.errors import UserError
from iclr26.interp.capture import capture
from iclr26.interp.sae import SparseDictionary


@torch.no_grad()
def max_pooled_latents(model: nn.Module, sae: SparseDictionary, batches: Any, site: str | None = None, *,
                       positions: Any = "all", skip_first: bool = False) -> torch.Tensor:
    """``[N, n_latents]``: per example the max over the selected tokens of ``sae.encode(x)`` at ``site``.

    ``positions`` as in :func:`iclr26.interp.capture.capture` (pads never count); ``skip_first`` also drops each
    row's first real token (BOS: its activations are outliers in most models).
    """
    name = site or sae.input_site
    if name is None:
        raise UserError("max_pooled_latents: pass site= (the dictionary names no input site)")
    if skip_first:
        if positions != "all":
            raise UserError("skip_first=True works with positions='all' only; pass a capture_mask instead")

        def positions(ids, am):  # noqa: F811 - the mask rule replaces the word
            m = am.bool().clone()
            first = m.float().argmax(1)  # first real token of each row (left or right padding)
            m[torch.arange(m.shape[0]), first] = False
            return m

    parts: list[tuple[torch.Tensor, torch.Tensor]] = []

    def sink(_site, acts, meta):
        # acts: [n_selected, d] for this batch; meta["index"][:, 0] is each token's example (global row)
        f = sae.encode(acts.float())  # [n_selected, n_latents]
        rows = meta["index"][:, 0].long()
        uniq, inv = rows.unique(return_inverse=True)
        out = torch.full((uniq.numel(), sae.n_latents), float("-inf"))
        out.scatter_reduce_(0, inv[:, None].expand_as(f), f, reduce="amax")
        parts.append((uniq, out))

    capture(model, batches, name, positions=positions, sink=sink, desc="latents")
    if not parts:
        raise UserError("max_pooled_latents: no token was selected")
    n_ex = int(max(int(u.max()) for u, _ in parts)) + 1
    F = torch.full((n_ex, sae.n_latents), float("-inf"))
    for u, out in parts:
        F[u] = torch.maximum(F[u], out)
    if torch.isinf(F).any():
        raise UserError("max_pooled_latents: an example had no selected token")
    return F


@dataclass
class LatentRanking:
    """Latents ranked by |coef| of the L1 logistic regression (non-zero ones only), with held-out AUROC."""

    latents: np.ndarray
    coef: np.ndarray
    auroc_test: float | None
    estimator: Any


def discover_latents(F: Any, y: Any, *, C: float = 1.0, top: int = 100, F_test: Any = None, y_test: Any = None,
                     seed: int = 0) -> LatentRanking:
    """StandardScaler then L1 logistic regression (liblinear, ``C``, max_iter 1000); the ``top`` latents with the
    largest |coefficient| (non-zero only). ``F``: ``[N, n_latents]`` (e.g. :func:`max_pooled_latents`)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X = np.asarray(torch.as_tensor(F).double())
    lab = np.asarray(y).astype(int).reshape(-1)
    if X.ndim != 2 or X.shape[0] != lab.shape[0]:
        raise UserError(f"discover_latents: F must be [N, n_latents] with N = len(y), got {X.shape} and {lab.shape}")
    if set(np.unique(lab)) != {0, 1}:
        raise UserError("discover_latents: y must contain both classes 0 and 1")
    if not (C > 0 and top >= 1):
        raise UserError(f"discover_latents: need C > 0 and top >= 1, got C={C}, top={top}")
    import sklearn

    major, minor = (int(v) for v in sklearn.__version__.split(".")[:2])
    # scikit-learn 1.8 deprecates penalty= in favour of l1_ratio (1.0 = pure L1); older versions need penalty="l1"
    l1 = {"l1_ratio": 1.0} if (major, minor) >= (1, 8) else {"penalty": "l1"}
    est = make_pipeline(StandardScaler(), LogisticRegression(C=C, solver="liblinear", max_iter=1000,
                                                             random_state=seed, **l1)).fit(X, lab)
    coef = est[-1].coef_.reshape(-1)
    order = np.argsort(-np.abs(coef), kind="stable")
    order = order[np.abs(coef[order]) > 0][:top]
    auc = None
    if F_test is not None:
        Xt = np.asarray(torch.as_tensor(F_test).double())
        auc = float(roc_auc_score(np.asarray(y_test).astype(int), est.decision_function(Xt)))
    return LatentRanking(order, coef[order], auc, est)


def logit_lens_latents(sae: SparseDictionary, unembed: Any, tokens: Sequence[int], *, top: int = 10,
                       sign: str = "pos", final_norm: nn.Module | None = None) -> torch.Tensor:
    """Latents whose decoder row most raises (``sign="pos"``) or lowers (``"neg"``) the logits of ``tokens``.

    Score of latent j = mean over ``tokens`` of ``W_dec[j] · W_U[t]`` (the direct logit effect of one unit of the
    latent, up to the final norm's scale; pass ``final_norm`` to apply its weight first: a RMSNorm/LayerNorm weight
    multiplies each coordinate). ``unembed``: the LM head weight ``[vocab, d]``.
    """
    W_U = torch.as_tensor(unembed).float()
    if W_U.ndim != 2 or W_U.shape[1] != sae.d_out:
        raise UserError(f"logit_lens_latents: unembed must be [vocab, {sae.d_out}], got {tuple(W_U.shape)}")
    t = torch.as_tensor(list(tokens), dtype=torch.long)
    if t.numel() == 0 or int(t.min()) < 0 or int(t.max()) >= W_U.shape[0]:
        raise UserError(f"logit_lens_latents: tokens must be a non-empty list of ids in 0..{W_U.shape[0] - 1}")
    if sign not in ("pos", "neg"):
        raise UserError(f"logit_lens_latents: sign={sign!r}; allowed: pos, neg")
    if not 1 <= top <= sae.n_latents:
        raise UserError(f"logit_lens_latents: top must be in 1..{sae.n_latents}, got {top}")
    D = sae.W_dec.detach().float()  # [n, d]
    if final_norm is not None and getattr(final_norm, "weight", None) is not None:
        w = final_norm.weight.detach().float()
        # Gemma-style RMSNorm stores (weight - 1); its forward multiplies by (1 + weight)
        w = 1.0 + w if type(final_norm).__name__.startswith("Gemma") else w
        D = D * w
    s = (D @ W_U[t].T).mean(1)  # [n]
    return torch.sort(-s if sign == "pos" else s, stable=True).indices[:top]
