"""Latent discovery and logit-lens feature choice: a planted latent is found, the pooled max matches a dense
capture, and the logit-lens ranking matches the matrix product written out."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr26.core.errors import UserError
from iclr26.interp.capture import capture
from iclr26.interp.latents import discover_latents, logit_lens_latents, max_pooled_latents
from iclr26.interp.sae import SparseDictionary
from iclr26.lm import tiny_lm


def _sae(d=32, n=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    sae = SparseDictionary(d, n, activation="relu", input_site="layers.1.resid_post")
    with torch.no_grad():
        for p in sae.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return sae


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_max_pooled_latents_match_dense_capture(family):
    model = tiny_lm(family, d=32, layers=2, seed=0)
    sae = _sae()
    ids = torch.randint(0, 64, (5, 7), generator=torch.Generator().manual_seed(1))
    am = torch.ones_like(ids)
    am[1, 5:] = 0  # right padding on one row
    batches = [{"input_ids": ids[:3], "attention_mask": am[:3]}, {"input_ids": ids[3:], "attention_mask": am[3:]}]
    F = max_pooled_latents(model, sae, batches)
    cap = capture(model, {"input_ids": ids, "attention_mask": am}, "layers.1.resid_post")
    x = cap["layers.1.resid_post"]
    rows = cap.index[:, 0]
    with torch.no_grad():
        want = torch.stack([sae.encode(x[rows == i]).amax(0) for i in range(5)])
    torch.testing.assert_close(F, want)
    F2 = max_pooled_latents(model, sae, batches, skip_first=True)
    pos = cap.index[:, 1]
    with torch.no_grad():
        want2 = torch.stack([sae.encode(x[(rows == i) & (pos > 0)]).amax(0) for i in range(5)])
    torch.testing.assert_close(F2, want2)


def test_discover_latents_finds_a_planted_latent():
    rng = np.random.default_rng(0)
    F = rng.exponential(size=(400, 50))
    y = rng.integers(0, 2, 400)
    F[:, 17] += 3.0 * y  # latent 17 carries the label
    r = discover_latents(F[:300], y[:300], C=0.05, top=5, F_test=F[300:], y_test=y[300:])
    assert r.latents[0] == 17 and r.coef[0] > 0 and r.auroc_test > 0.9
    shuffled = discover_latents(F[:300], rng.permutation(y[:300]), C=0.05, top=5, F_test=F[300:], y_test=y[300:])
    assert shuffled.auroc_test is None or shuffled.auroc_test < 0.7
    with pytest.raises(UserError, match="both classes"):
        discover_latents(F, np.zeros(400))
    with pytest.raises(UserError, match="N = len"):
        discover_latents(F, y[:10])


def test_logit_lens_latents_written_out():
    sae = _sae(d=8, n=12, seed=2)
    W_U = torch.randn(20, 8, generator=torch.Generator().manual_seed(3))
    s = (sae.W_dec.detach() @ W_U[[4, 9]].T).mean(1)
    assert logit_lens_latents(sae, W_U, [4, 9], top=3).tolist() == torch.argsort(-s)[:3].tolist()
    assert logit_lens_latents(sae, W_U, [4, 9], top=3, sign="neg").tolist() == torch.argsort(s)[:3].tolist()
    with pytest.raises(UserError, match="unembed"):
        logit_lens_latents(sae, W_U[:, :5], [1])
    with pytest.raises(UserError, match="tokens"):
        logit_lens_latents(sae, W_U, [25])
