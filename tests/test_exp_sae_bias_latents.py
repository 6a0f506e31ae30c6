"""sae-bias-latents: smoke wiring, the claims it must report, determinism, and the config's cross-field rules."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from iclr26.core.errors import UserError
from iclr26.experiments import sae_bias_latents as m
from iclr26.runs import RunContext

CLAIMS = {"C1_discovery_auroc", "C1_top_activations", "C2_stigma_vs_findings", "C2_stigma_vs_group_B_latent",
          "C3_steer_monotone", "C3_steer_vs_random", "C3_group_token_rises", "C4_attribution_top5pct",
          "C5_vignette_ablation", "C5_risk_gap_reduction", "sanity_bias_planted", "sanity_answers_learned"}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("p10")
    mp = pytest.MonkeyPatch()
    mp.setenv("ICLR26_ORGANISMS", str(tmp / "orgs"))
    try:
        cfg = dataclasses.replace(m.Config(), **m.PRESETS["smoke"])
        res = m.run(cfg, RunContext(tmp / "run", torch.device("cpu"), 0, "smoke"))
        res2 = m.run(cfg, RunContext(tmp / "run2", torch.device("cpu"), 0, "smoke"))  # organism from the cache
    finally:
        mp.undo()
    return cfg, res, res2, tmp


def test_smoke_reports_every_claim_and_figure(smoke):
    cfg, res, _, tmp = smoke
    assert {c.name for c in res.claims} >= CLAIMS
    assert 0.0 <= res.metrics["discovery_auroc"] <= 1.0
    assert 0 <= res.metrics["latent_A"] < cfg.n_latents and res.metrics["latent_A"] != res.metrics["latent_B"]
    assert 0.0 <= res.metrics["atp_rank_pct_A"] <= 1.0
    assert res.metrics["n_random_latents"] == cfg.n_random
    assert res.metrics["steer_ref_mean_max_f"] > 0
    figs = {p.stem for p in (tmp / "run" / "figures").glob("*.png")}
    assert figs >= {"discovery", "latent_activation", "steering_dose_response", "ablation"}
    by = {c.name: c for c in res.claims}
    for c in res.claims:  # every gated paper claim has a null arm, and its verdict is the engine's
        assert c.verdict in ("held", "not held", "inconclusive", "no power")
        if c.gated and c.kind == "paper":
            assert c.null is not None and c.null_what
    # the discovery / steering-curve / attribution claims are measured against the unplanted organism
    assert "p_flip = 0" in by["C1_discovery_auroc"].null_what
    assert by["C1_discovery_auroc"].null.value == res.metrics["null_discovery_auroc"]
    assert by["C4_attribution_top5pct"].estimate.unit == "note"
    assert 0.0 <= res.metrics["null_atp_rank_pct_A"] <= 1.0
    # C1, C2 and C3 all take the unplanted organism as their null arm, measured by the same pipeline
    for name in ("C1_top_activations", "C2_stigma_vs_findings", "C2_stigma_vs_group_B_latent", "C3_steer_monotone",
                 "C3_steer_vs_random", "C3_group_token_rises"):
        assert "p_flip = 0" in by[name].null_what, name
    assert by["C2_stigma_vs_findings"].null.value == pytest.approx(res.metrics["null_stigma_over_findings"])
    assert by["C3_steer_vs_random"].null.value == pytest.approx(res.metrics["null_steer_vs_random"])
    assert res.metrics["latent_A_scale"] > 0


def test_smoke_is_deterministic_and_uses_the_cache(smoke):
    _, res, res2, _ = smoke
    assert "organisms cached=1/1" in res2.notes and "organisms cached=0/0" in res.notes
    for k in ("discovery_auroc", "latent_A", "p_yes_k1", "vignette_share_reduction", "atp_effect_A",
              "null_discovery_auroc", "null_steer_min_step"):
        assert res.metrics[k] == res2.metrics[k], k
    for a, b in zip(res.claims, res2.claims, strict=True):
        assert (a.name, a.verdict, a.estimate) == (b.name, b.verdict, b.estimate)


def test_seed_changes_results(smoke):
    cfg, res, _, tmp = smoke
    mp = pytest.MonkeyPatch()
    mp.setenv("ICLR26_ORGANISMS", str(tmp / "orgs"))
    try:
        other = m.run(cfg, RunContext(tmp / "run3", torch.device("cpu"), 1, "smoke"))
    finally:
        mp.undo()
    assert "organisms cached=0/0" in other.notes  # another seed trains other organisms
    assert other.metrics["p_yes_group_free"] != res.metrics["p_yes_group_free"]


def test_steering_curve_starts_at_the_unedited_model(smoke):
    # k = 0 is the plain forward: P(Yes) at k=0 must equal the organism's own mean P(Yes) on the same notes
    _, res, _, _ = smoke
    assert res.metrics["p_yes_k0"] == pytest.approx(res.metrics["p_yes_group_free"], abs=1e-12)
    assert np.isfinite(res.metrics["risk_gap"])


def test_matched_pool_is_frequency_matched():
    freq = np.array([0.0, 0.5, 0.01, 0.011, 0.012, 0.3, 0.009, 0.2, 0.0105, 0.4])
    assert m._matched_pool(freq, 2, {2}, 1) == [8]  # the nearest alive latent in log frequency
    assert m._matched_pool(freq, 2, {2}, 3) == [3, 6, 8]
    got = m._matched_pool(freq, 2, {2}, 20)
    assert 2 not in got and 0 not in got and len(got) == 8  # dead latent 0 is never used


def test_config_rules():
    with pytest.raises(UserError, match="sae_layer"):
        dataclasses.replace(m.Config(), sae_layer=3, layers=3).validate()
    with pytest.raises(UserError, match="k="):
        dataclasses.replace(m.Config(), k=64, n_latents=32).validate()


def test_context_mask_drops_bos_group_tokens_and_the_three_after():
    # reference oracle: a plain loop over rows and positions
    g = [7, 9]
    ids = torch.tensor([[1, 5, 7, 5, 5, 5, 5, 9, 5, 0], [1, 5, 5, 5, 5, 5, 5, 5, 7, 5], [1, 9, 7, 5, 5, 5, 5, 5, 5, 5]])
    am = torch.ones_like(ids)
    am[0, -1] = 0
    want = torch.zeros_like(ids, dtype=torch.bool)
    for r in range(ids.shape[0]):
        for t in range(1, ids.shape[1]):
            near = any(int(ids[r, q]) in g for q in range(max(0, t - 3), t + 1))
            want[r, t] = bool(am[r, t]) and not near
    got = m._context_mask(g, after=3)(ids, am)
    assert torch.equal(got, want)
    assert got[1, 1:8].all() and not got[1, 8:].any() and not got[:, 0].any()
