"""Attribution patching over SAE latents (integrated gradients, zero baseline, error term kept).

Used by "Can SAEs reveal and mitigate racial biases of LLMs in healthcare?" (P10, arXiv 2511.00177), whose code
scores GemmaScope latents by attribution patching with 3 integrated-gradient steps toward a zero baseline. With
``f = enc(x)`` at the dictionary's site and the error term kept, the path scales every latent together,

    x(α) = x + (α − 1) · (dec(f) − b_dec) = x − (1 − α) · W_decᵀ f,     α: 1 → 0,

and the estimated effect of zeroing latent j (at every selected position) on the metric is

    effect_j = (0 − f_j) · mean_α [ W_dec[j] · ∂m/∂x (x(α)) ],    α at the midpoints (k + ½)/steps,

an estimate of ``m(latent j zeroed) − m(clean)`` (positive = the latent *lowers* the metric). The effects of all
latents add up to ``m(all latents zeroed) − m(clean)`` up to the midpoint-rule error (completeness).
:func:`iclr26.interp.attribution.atp_ig` does the same on a site's raw units.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from iclr26.core.errors import UserError
from iclr26.core.progress import progress
from iclr26.interp.attribution import Attribution, Metric, _frozen, _iter
from iclr26.interp.capture import forward_kwargs, select_positions
from iclr26.interp.hooks import eval_mode, hooks, register_replace_hook
from iclr26.interp.sae import SparseDictionary
from iclr26.lm.sites import get_adapter


def latent_atp_ig(model: nn.Module, sae: SparseDictionary, batches: Any, metric: Metric, *, steps: int = 3,
                  positions: Any = "all", site: str | None = None, desc: str = "latent_atp") -> Attribution:
    """Per-example, per-latent estimate of ``m(latent zeroed) − m(clean)``, summed over ``positions``.

    ``batches`` and ``metric(logits, batch) -> [B]`` as in :func:`iclr26.interp.attribution.atp`; ``positions`` as
    in :func:`iclr26.interp.capture.capture` (a mask rule, e.g. a window that drops template tokens). Returns an
    :class:`~iclr26.interp.attribution.Attribution` with ``scores[site]`` of shape ``[N, n_latents]`` (fp32).
    ``steps=1`` is plain attribution patching (gradient at the clean point).
    """
    if not isinstance(sae, SparseDictionary):
        raise UserError(f"latent_atp_ig needs an iclr26 SparseDictionary, got {type(sae).__name__}")
    if not isinstance(steps, int) or steps < 1:
        raise UserError(f"latent_atp_ig: steps must be an integer >= 1, got {steps!r}")
    name = site or sae.input_site
    if name is None:
        raise UserError("latent_atp_ig: pass site= (the dictionary names no input site)")
    if sae.output_site not in (None, name):
        raise UserError("latent_atp_ig works on SAEs (input site = output site), not transcoders")
    s = get_adapter(model).resolve(name)
    if s.read_only:
        raise UserError(f"{s.name} cannot carry a gradient: {s.read_only}")
    import inspect

    params = set(inspect.signature(model.forward).parameters)
    device = next(model.parameters()).device
    W = sae.W_dec.detach().float()  # [n, d]
    acc, metrics = [], []
    with eval_mode(model, s.needs_eager), _frozen(model):
        for batch, ids, am in progress(list(_iter(batches)), desc=desc):
            sel = select_positions(positions, ids, am).to(device).float()  # [B, T]
            kw = forward_kwargs(params, batch, ids, am, device)
            with torch.no_grad():
                out = model(**kw)
                logits = out.logits if hasattr(out, "logits") else out[0]
                m_clean = metric(logits, {**batch, "input_ids": ids.to(device), "attention_mask": am.to(device)})
            gsum = None
            f0 = None
            alphas = [1.0] if steps == 1 else [1.0 - (k + 0.5) / steps for k in range(steps)]
            for a in alphas:
                state: dict[str, torch.Tensor] = {}

                def fn(x, a=a, state=state):
                    with torch.no_grad():
                        f = sae.encode(x.float())  # [B, T, n]
                        shift = (1.0 - a) * (f @ W).to(x.dtype)  # W_decᵀ f, without b_dec
                    z = torch.zeros_like(x, requires_grad=True)
                    state["f"], state["z"] = f, z
                    return x - shift + z

                with torch.enable_grad(), hooks(lambda h, fn=fn: h.append(register_replace_hook(s, fn))):
                    out = model(**kw)
                    logits = out.logits if hasattr(out, "logits") else out[0]
                    m = metric(logits, {**batch, "input_ids": ids.to(device), "attention_mask": am.to(device)})
                    if not isinstance(m, torch.Tensor) or m.shape != (ids.shape[0],):
                        raise UserError(f"metric must return a tensor of shape [batch]={ids.shape[0]}")
                    if "z" not in state:
                        raise RuntimeError(f"site {s.name} did not fire during the forward pass")
                    (g,) = torch.autograd.grad(m.sum(), [state["z"]], allow_unused=True)
                g = torch.zeros_like(state["z"]) if g is None else g
                gl = g.float() @ W.T  # [B, T, n]: ∂m/∂f_j along the path
                gsum = gl if gsum is None else gsum + gl
                if f0 is None:
                    f0 = state["f"]
            eff = -f0 * gsum / len(alphas)  # [B, T, n]
            acc.append((eff * sel[..., None]).sum(1).cpu())
            metrics.append(m_clean.float().cpu())
    if not acc:
        raise UserError("latent_atp_ig got no batches")
    return Attribution(scores={s.name: torch.cat(acc)}, metric=torch.cat(metrics), reduce_pos="sum",
                       method="latent_atp" if steps == 1 else f"latent_atp_ig{steps}",
                       extra={"steps": steps, "baseline": "zero"})
