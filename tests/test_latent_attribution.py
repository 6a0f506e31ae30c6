"""Attribution patching over SAE latents: checked against the IG formula written out with autograd on the
latents themselves, against IG completeness (effects add up to the all-latents-zeroed change), and on bad input."""

from __future__ import annotations

import pytest
import torch

from iclr26.core.errors import UserError
from iclr26.interp.attribution import logit_diff
from iclr26.interp.hooks import replace_sites
from iclr26.interp.latent_attribution import latent_atp_ig
from iclr26.interp.sae import SparseDictionary
from iclr26.interp.sae_edit import sae_edit, zero
from iclr26.lm import tiny_lm

SITE = "layers.0.resid_post"


def _setup(n=24, act="relu", family="llama"):
    model = tiny_lm(family, d=16, layers=2, heads=2, vocab=40, seed=0)
    g = torch.Generator().manual_seed(3)
    sae = SparseDictionary(16, n, activation=act, k=6 if act == "topk" else None, input_site=SITE)
    with torch.no_grad():
        for p in sae.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    ids = torch.randint(4, 40, (3, 6), generator=g)
    am = torch.ones_like(ids)
    am[2, 4:] = 0
    return model, sae, {"input_ids": ids, "attention_mask": am}


def _oracle(model, sae, batch, metric, steps):
    """The paper's AtP-IG written on the latents: f is a leaf, x' = x - dec(f0) + dec(a f), grad w.r.t. f."""
    ids, am = batch["input_ids"], batch["attention_mask"]
    alphas = [1.0] if steps == 1 else [1 - (k + 0.5) / steps for k in range(steps)]
    total = 0
    for a in alphas:
        leaf = {}

        def fn(x, a=a, leaf=leaf):
            f0 = sae.encode(x).detach()
            fa = (a * f0).requires_grad_(True)
            leaf["f0"], leaf["fa"] = f0, fa
            return x - sae.decode(f0).detach() + sae.decode(fa)

        with replace_sites(model, {SITE: fn}):
            m = metric(model(input_ids=ids, attention_mask=am).logits, batch)
        (g,) = torch.autograd.grad(m.sum(), [leaf["fa"]])
        total = total + g
    eff = -leaf["f0"] * total / len(alphas)  # [B, T, n]
    return (eff * am[..., None]).sum(1)


@pytest.mark.parametrize("steps,family", [(1, "llama"), (3, "llama"), (3, "qwen2"), (3, "gemma3")])
def test_matches_ig_written_on_the_latents(steps, family):
    model, sae, batch = _setup(family=family)
    metric = logit_diff(5, 7)
    got = latent_atp_ig(model, sae, batch, metric, steps=steps, site=SITE)
    want = _oracle(model, sae, batch, metric, steps)
    torch.testing.assert_close(got[SITE], want.float(), rtol=1e-4, atol=1e-5)
    assert got[SITE].shape == (3, 24) and got.method.startswith("latent_atp")
    with torch.no_grad():
        clean = metric(model(**batch).logits, batch)
    torch.testing.assert_close(got.metric, clean)


def test_completeness_sums_to_zeroing_every_latent():
    model, sae, batch = _setup(act="topk")
    with torch.no_grad():  # decoder rows on the residual's scale (the random ones dwarf it and saturate RMSNorm)
        sae.W_dec.mul_(0.02)
    metric = logit_diff(5, 7)
    got = latent_atp_ig(model, sae, batch, metric, steps=64, site=SITE)
    with torch.no_grad(), sae_edit(model, sae, zero(list(range(24))), site=SITE):
        zeroed = metric(model(**batch).logits, batch)
    assert float((zeroed - got.metric).abs().max()) > 1e-2  # the check is not trivially 0 == 0
    torch.testing.assert_close(got[SITE].sum(1), zeroed - got.metric, rtol=2e-2, atol=2e-3)
    # a window that selects no position gives zero effects
    none = latent_atp_ig(model, sae, batch, metric, steps=2, site=SITE,
                         positions=lambda ids, am: torch.zeros_like(am, dtype=torch.bool))
    assert float(none[SITE].abs().max()) == 0.0


def test_bad_input():
    model, sae, batch = _setup()
    with pytest.raises(UserError, match="steps"):
        latent_atp_ig(model, sae, batch, logit_diff(5, 7), steps=0)
    with pytest.raises(UserError, match="SparseDictionary"):
        latent_atp_ig(model, torch.nn.Linear(2, 2), batch, logit_diff(5, 7))
    bare = SparseDictionary(16, 8, activation="relu")
    with pytest.raises(UserError, match="site"):
        latent_atp_ig(model, bare, batch, logit_diff(5, 7))
