"""Checks every implemented paper passes: config, presets, smoke run, output files."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from iclr26 import registry
from iclr26.core.config import config_from_dict, config_to_dict, field_docs
from iclr26.engine import build_config, run_paper

IMPLEMENTED = registry.implemented()


def test_registry_has_19_unique_papers():
    slugs = [p.slug for p in registry.PAPERS]
    assert len(slugs) == 19 and len(set(slugs)) == 19
    assert all(p.area and p.title and p.id for p in registry.PAPERS)


@pytest.mark.parametrize("slug", IMPLEMENTED)
def test_config_default_constructible_and_documented(slug):
    mod = registry.get(slug).load()
    cfg = mod.Config()
    assert dataclasses.is_dataclass(cfg)
    docs = field_docs(mod.Config)
    assert all(docs.values()), f"undocumented fields: {[k for k, v in docs.items() if not v]}"
    assert getattr(mod, "DESCRIPTION", "").strip()


@pytest.mark.parametrize("slug", IMPLEMENTED)
def test_config_json_round_trip_and_presets(slug):
    mod = registry.get(slug).load()
    for preset in registry.PRESET_NAMES:
        cfg = build_config(slug, preset)
        again = config_from_dict(mod.Config, json.loads(json.dumps(config_to_dict(cfg))))
        assert config_to_dict(again) == config_to_dict(cfg)


@pytest.mark.parametrize("slug", IMPLEMENTED)
def test_smoke_preset_runs_and_writes_files(slug, tmp_path):
    run_dir, result = run_paper(slug, preset="smoke", out=tmp_path, device="cpu")
    for name in ("config.json", "metrics.json", "claims.json", "env.json", "report.md"):
        assert (run_dir / name).exists(), name
    assert list((run_dir / "figures").glob("*.png")), "no figure written"
    metrics = json.loads((run_dir / "metrics.json").read_text())
    bad = [k for k, v in metrics.items() if not math.isfinite(v)]
    assert not bad, f"non-finite metrics: {bad}"
    claims = json.loads((run_dir / "claims.json").read_text())
    assert claims and all({"name", "statement", "value", "threshold", "holds"} <= set(c) for c in claims)


# ---------------------------------------------------------------------------- library modules
def _library_modules_used(module_name: str) -> set[str]:
    """The iclr26 library modules (not core/runs) that an experiment module imports, anywhere in it."""
    import ast
    import importlib
    import importlib.util
    import inspect

    mod = importlib.import_module(module_name)
    used = set()
    for node in ast.walk(ast.parse(inspect.getsource(mod))):
        if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("iclr26."):
            continue
        for alias in node.names:
            full = f"{node.module}.{alias.name}"
            if importlib.util.find_spec(node.module).submodule_search_locations is None:
                home = node.module  # a name from a module
            elif importlib.util.find_spec(full) is not None:
                home = full  # a submodule of a package
            else:
                home = getattr(importlib.import_module(node.module), alias.name).__module__
            if not home.startswith(("iclr26.core", "iclr26.runs")):
                used.add(home)
    return used


@pytest.mark.parametrize("slug", IMPLEMENTED)
def test_paper_names_its_library_modules(slug):
    import importlib

    paper = registry.get(slug)
    assert paper.library, f"{slug}: registry.Paper.library is empty"
    for name in paper.library:
        importlib.import_module(name)
    missing = _library_modules_used(paper.module) - set(paper.library)
    assert not missing, f"{slug} uses library modules its Paper entry does not name: {sorted(missing)}"


# ---------------------------------------------------------------------------- default preset
# Gated claims measured NOT to hold at the CPU default preset, per paper, each with its reason. They
# stay gated (reported as failing in every run) and are exempted here only; remove an entry as soon
# as the claim holds.
KNOWN_FAILING_AT_DEFAULT: dict[str, dict[str, str]] = {
    "humof": {
        "C5_hsi_penetration": "HUMOF-lite's forecasts enter boxes in 2.6% of frames vs ego-only's 2.0% (ground truth "
        "1.1%): the context-aware arms predict paths that pass closer to obstacles (docs/humof.md)",
    },
    # Gated claims measured NOT to hold at the default preset, each with the reason its docs give. The
    # test still runs them and fails on any other gated claim; a claim here that starts to hold is fine.
    "ptq-meta-weighting": {
        # W3A8 by the spec's switch rule (W4A8 RTN was within 1.2x of FP: 1.016); docs/ptq-meta-weighting.md
        "sanity_rtn_gap": "W3A8 RTN's FD-digits is only 1.07x the FP model's (600-step FP model, FD 152): no gap to close",
        "C1_traj_l2_every_seed": "reconstruction of P18: 'both' is worse than uniform in the worst seed (-0.0032 L2)",
        "C1_traj_l2_gain_vs_spread": "mean trajectory-L2 gain of 'both' over uniform is below 2x the seed spread (-0.0083)",
        "C1_fd_every_seed": "thin: 'both' is below uniform on FD-digits in both seeds by only 0.38 (FD ~157, seed "
        "range of uniform 8.5), inside seed noise; not a stable verdict either way",
        "C1_fd_gain_vs_spread": "mean FD gain of 'both' over uniform is below 2x the seed spread (-8.5)",
        "C1_traj_l2_bootstrap": "paired bootstrap CI of uniform - both trajectory L2 includes 0 (lower bound -6.7e-05)",
        "ctrl_random_weights": "fixed random weights of matched entropy do as well as 'both' (CI lo -5.3e-04)",
    },
    "composable-subnetworks": {
        "C1b": "single-class modules pick their own class on ~40% of off-class samples, F1 0.36 vs 0.83",
        "C1f": "the same over-prediction, measured as the off-class argmax share (0.38 above the generalist)",
        "C3c": "the masks on the untrained warm-up point already reach 0.76: +0.05 < 0.10 from training",
        "C4a": "with a warmed-up rewinding point both barriers are ~0.035 nats, no separation",
    },
    "nufilt": {
        "C2_acc_vs_OPCM": "over 3 seeds at s=4 the lead over OPCM is +2.14/+0.32/+2.26 (mean 1.57, sd 1.09) < 2",
        "C2_gap_vs_OPCM_exceeds_std": "the same thin lead does not exceed its spread over orders on seed 1",
        "C2_fmnist_acc_vs_OPCM": "Fashion-MNIST-derived tasks: NUFILT +0.4 over OPCM (12-d PCA features)",
        "C2_fmnist_acc_vs_WUDI": "Fashion-MNIST-derived tasks: NUFILT +1.9 over WUDI, just under the 2-point bar",
        "C4b_projector_stability_s0": "at s=0 (BWT -0.05, sd 0.53) the tasks' fc1 inputs are orthogonal, "
        "so P can only act through fc2",
    },
    "fdfi": {
        "flow_disentangles_mixture": "at 1500 flow steps the flow's latents are slightly more dependent than "
        "the Gaussian map's on the paper's mixture (gap -0.0004; also at 4000 steps)",
        "calib_ignored": "breast cancer: the screened inference rejects ignored columns at 10% but their "
        "p-values pile up below 1/2 (D+ 0.265 > 0.223)",
    },
    "latent-planning": {
        "C1_zero_drop": "zeroing the planning latents lowers P(correct article) by 0.029 at d=128 (< 0.10; "
        "random equal-count sets 0.015, 95th pct 0.023); docs/latent-planning.md",
        "C1_x5_not_lower": "x5 on the planning latents lowers P(correct article) by 0.21: they promote the noun but "
        "are not what the article reads",
        "C2_swap": "adding an opposite-class noun's planning latents raises P(other article) 0.40, random latents "
        "of the same partner item 0.57 (they carry the direct definition -> article lookup)",
        "C4_heldout_above_chance": "held-out composition accuracy 0.31 at d=128 (16 nouns; chance, as the spec's "
        "pilot found): planning for unseen definition->article pairs not reproduced at toy scale",
        "C4_heldout_rises": "held-out accuracy 0.44 / 0.44 / 0.31 at d = 32 / 64 / 128: no rise",
    },
    "sae-seeds": {
        "C2_below": "below the dictionary size the shared fraction does not fall with width: 0.70 / 0.82 / 0.79 "
        "at widths 64 / 128 / 256 on 512 true features (docs/sae-seeds.md)",
        "C3": "at width 64 (one disjoint seed pair, 64 latents) shared latents fire more often but not "
        "significantly (Mann-Whitney p = 0.034 > 0.01); every other width p < 1e-6",
    },
    "culture-neurons": {
        "C1_cultural_drop": "zeroing the 13 culture-general units lowers test-topic accuracy by 1.25 points < 15 "
        "(the 22 units before the reading filter: 7.5; docs/culture-neurons.md)",
        "C1_above_random": "that 1.25-point drop is below the random sets' 95th percentile (2.2 points)",
        "C1_nlu_kept": "the same suppression costs cmp 3.5 points > 3 (random sets' 95th percentile also 3.5)",
        "C3_specific": "culture-specific units: target-country drop minus the others' -0.05 < 0.10",
        "C4_siblings": "the sibling drops more than the unrelated countries for 5 of 8 countries < 6",
        "C5_finetune": "fine-tuning min in the richest layer's MLP costs 4.6 points more cultural accuracy than in "
        "the poorest layer's (0.68 vs 0.64) < 5; both forget most of it",
        "sanity_clean_cultural": "2000 steps (the 3-minute budget) leave test-topic accuracy at 0.875 < 0.9",
        "sanity_ft_learned": "500 steps in the poorest layer's MLP reach 0.79 on min < 0.9 (richest layer: 0.99)",
    },
    "hyper-set": {
        "C1_vs_vit4": "Hyper-SET 0.694 vs the unshared ViT-4 0.794 (-10 points < -3) with 0.26x its parameters; it "
        "ties the parameter-matched ViT-1 (0.694); it learns more slowly from zero steps in 8 epochs (docs/hyper-set.md)",
        "C2_samples_fall": "E(6) < E(0) for 82% of test samples < 90% (parameter-free energy 84%); about half of the "
        "learned alpha are negative, so E_ATTN rises (reversed-steps control: 0%)",
        "C2_median_steps": "the median energy rises at t = 2 and 3 (788, 778, 784, 793, 787, 771, 756): 4/6 < 0.8",
        "C3_hyper_set_stable": "at 12 recurrences Hyper-SET loses 2.8 points (0.694 -> 0.666) > 2; the looped ViT "
        "loses 5.7 (0.759 -> 0.702)",
        "C4_sudoku_board": "4x4 Sudoku, 10 blanks, 15 epochs: Hyper-SET solves 35% of held-out boards vs 80% for "
        "the unshared Transformer-4 and 91% for the looped one (blank cells 0.87 / 0.96 / 0.98)",
    },
    "reasoning-misalignment": {
        # seed 0's organism under torch 2.13 / transformers 5.25 (what CI installs) holds none of the gated
        # claims; seeds 1 and 2 hold 6 of 9 each, an earlier environment's seed 0 held 5: the verdicts are
        # seed noise at this scale (docs/reasoning-misalignment.md)
        "C1": "zeroing the 19-neuron A_safe (m=256) raises misalignment by 0.0 points < 20",
        "C1_vs_random": "A_safe zeroing +0.0 points vs random equal-size sets' 95th percentile +0.11",
        "C2_flagged": "no head's first-answer attention argmax moves onto the empty think span (0 flagged)",
        "C2_ablation": "not computable with no flagged head (NaN)",
        "C3_spearman": "Spearman(RAS_safe, Δmisalignment) over 18 checkpoints -0.05 < 0.6",
        "C3_vs_random": "RAS on random neurons tracks forgetting (0.82) far better than RAS_safe (-0.05)",
        "C3_vs_kl": "KL(π0‖πτ) tracks the forgetting (0.83) far better than RAS_safe (-0.05)",
        "C3_partial": "partial Spearman(RAS_safe, Δmis | step) -0.31 < 0.3",
        "C4": "RAS_safe(T) 0.53 < RAS_safe(C) 0.94 at the last checkpoint (0% of bootstrap resamples)",
        "sanity_base_math": "1200 pretraining steps (the 3-minute budget) leave base math accuracy at 0.125",
    },
    "role-modality-attacks": {
        "C1": "refusal trained in the canonical layout carries over to every swapped / moved layout in the organism "
        "(ASR 0.005 canonical, 0.0 in all 8 settings), the failure case the spec names; C2-C4 then are not "
        "applicable (docs/role-modality-attacks.md)",
    },
    "sae-bias-latents": {
        "C2_stigma_vs_findings": "seed 0's group-A latent is a pure group-token latent: 0.000 on stigma tokens vs "
        "0.032 on findings in group-free notes (holds for seeds 1, 2: 27.8, 3.9) (docs/sae-bias-latents.md)",
        "C2_stigma_vs_group_B_latent": "the same silent latent: 0.000 vs the group-B latent's 0.330 on stigma tokens",
        "C3_steer_vs_random": "P(Yes) +0.134 at k=1, but frequency-matched random latents at the same k*max f move "
        "it by 0.140 on average (the edit is ~0.9x the residual norm)",
        "C3_group_token_rises": "steering lowers the group-A share at 'patient is' (-0.169; random 95th pct +0.128)",
        "C5_vignette_ablation": "the latent is silent on vignette prompts (no group token before 'patient is'), so "
        "ablating it changes nothing (0.878 -> 0.878)",
    },
    "strategic-dishonesty": {
        # at 1500 steps (default since 2026-12-05) seed 0 holds 4/5; C1 (transfer, above random) is gated: it held
        # at seeds 0 and 1. C4 held at seed 0 only, so it is listed as seed noise (docs/strategic-dishonesty.md)
        "C3_steer_honest": "steering toward honesty is not above random directions of equal norm (-0.023 seed 0, "
        "-0.039 seed 1 at 1500 steps)",
        "C4_steer_dishonest": "seed noise: +0.048 at seed 0, -0.144 at seed 1 (1500 steps)",
    },
    "mi-ue": {
        "C1_miue_vs_em": "shallow victim: MI-UE 0.672 vs EM 0.659 clean test accuracy (+0.013, not <= -0.05) after "
        "10 generation epochs at eps 16/255 (docs/mi-ue.md)",
        "C1_both_vs_random": "EM and MI-UE cut accuracy by only ~0.12-0.13 below random noise (0.789), not 0.20",
        "C2_mi_lowest": "Gaussian MI of MI-UE (13.0) is above EM's (12.4) for the shallow victim; covariance is lowest",
        "C4_each_defense": "MI-UE <= EM under 1 of 4 defenses (cutout only); blur, median and 3-bit are +0.02-0.03",
        "C4_effective_where_em_degrades": "no defense lifts EM by 0.10 (all within +-0.03), so the case never arises",
        "sanity_source_fit_miue": "the MI-UE source model reaches 0.930 on x+delta (< 0.95) after 10 epochs",
        "sanity_clean_victim": "the clean 15-epoch shallow victim on 4,000 14x14 images reaches 0.792 (< 0.80)",
    },
    "functional-rectified-flow": {
        "reflow_keeps_modes": "the base FRF misses the 30% triangle mode by ~0.1 after 1000 steps (0.07 at the "
        "spec's 1200) and reflow inherits it: 0.159 at 2 steps (docs/functional-rectified-flow.md)",
        "marginals_learned": "each of 3 seeds meets the bar (-0.011, -0.009, -0.062) but mean + 1 sd is +0.003 "
        "(docs/functional-rectified-flow.md)",
    },
    "rangeformer": {
        "sanity_charton_w_learned": "the LAWT-style encoder reaches only 0.345 acc@5% in distribution after the "
        "spec's 1500 steps (< 0.7): C1 is inconclusive at this scale (docs/rangeformer.md)",
        "ctrl_charton_w_vs_constant": "the same under-training: Charton/W is no better than the training-mean "
        "constant in distribution (0.345 vs 0.370)",
        "C1_ood_collapse": "Charton/W OOD 0.185 vs ID 0.345 (ratio 0.54 > 0.5; seeds 1 / 2: 0.33 / 0.68); its ID "
        "accuracy is itself low, so the ratio is noise",
        "C2_rf_s_vs_charton_ood": "RangeFormer-lite/S reaches 0.195 on the OOD stand-ins, +0.01 over Charton/W "
        "(not +0.2): our reconstruction does not reproduce the OOD gain",
        "C3_data_intervention": "RF/S 0.195 vs RF/W 0.215 on the OOD stand-ins: structured pre-training helps on "
        "Matérn kernels (0.46 vs 0.09) but loses on Hilbert and real-graph Laplacians",
        "C5_loops": "RF/S drops from 0.251 at L = 8 to 0.159 at L = 16 (trained at L in 4..8): the looped block "
        "does not converge to a fixed point beyond its training loops",
    },
    "memorization-anisotropy": {
        "C1c_low_dup": "x4 duplicates are already memorized as strongly as x32 here (GT 0.92 vs 1.00); on them S "
        "is 0.020 below N (0.923 vs 0.943), not 0.01 above (docs/memorization-anisotropy.md)",
        "C2a_alignment_low_noise": "C at t=41 separates best of all timesteps but in the opposite direction: "
        "memorized prompts are anti-aligned (AUROC 0.067 vs 0.467 at t=981; fixed direction, no flipping)",
        "C2b_norm_high_noise": "the small model's norm term separates better at low noise (0.988 at t=41 vs 0.928 "
        "at t=981): the isotropy argument's premise does not hold for it",
    },
    "ampo": {
        "C1_tokens": "AMPO thinks 0.996x GRPO's tokens (302.9 vs 304.1, 10 seeds): at the spec's lr 0.05 the 32-parameter "
        "policy leaves uniform in ~12 steps, the all-modes gate shuts (on in 1.9% of groups) and AMPO is GRPO; "
        "0.91x at lr 0.005 (docs/ampo.md)",
        "C2_cheap_easy": "AMPO's P(L1 or L2 | easy) is 0.114 (GRPO 0.117): both settle on L3 in easy states, where "
        "L1-L3 tie in reward and the length tie-break fires in 0.18% of groups (docs/ampo.md)",
    },
}


def _fashion_mnist_or_skip() -> None:
    from iclr26.core.errors import MissingAssetError
    from iclr26.data import images

    try:
        images.load_fashion_mnist("test")
    except MissingAssetError:
        pytest.skip("Fashion-MNIST (Debian dataset-fashion-mnist) not installed")


# Default presets whose gated claims need an offline asset: (probe that skips without it, metric,
# the value that shows the asset was used). composable-subnetworks falls back to sklearn digits
# without Fashion-MNIST (where the permuted-sum control C3b does not hold; its docs say so); nufilt
# drops its Fashion-MNIST part and its gates.
NEEDS_ASSET_AT_DEFAULT = {
    "composable-subnetworks": (_fashion_mnist_or_skip, "dataset_is_fashion_mnist", 1.0),
    "nufilt": (_fashion_mnist_or_skip, "used_fashion_mnist", 1.0),
    "mi-ue": (_fashion_mnist_or_skip, "dataset_is_fashion_mnist", 1.0),
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "slug",
    [pytest.param(s, marks=pytest.mark.real) if s in NEEDS_ASSET_AT_DEFAULT else s for s in IMPLEMENTED],
)
def test_default_preset_gated_claims_hold(slug, tmp_path):
    if slug in NEEDS_ASSET_AT_DEFAULT:
        NEEDS_ASSET_AT_DEFAULT[slug][0]()
    _, result = run_paper(slug, preset="default", out=tmp_path, device="cpu")
    if slug in NEEDS_ASSET_AT_DEFAULT:
        _, metric, used = NEEDS_ASSET_AT_DEFAULT[slug]
        assert result.metrics[metric] == used, f"{slug} did not use its offline asset ({metric})"
    known = KNOWN_FAILING_AT_DEFAULT.get(slug, {})
    names = {c.name for c in result.claims}
    assert set(known) <= names, f"known failures name claims that do not exist: {set(known) - names}"
    failed = [
        (c.name, c.value, c.op, c.threshold)
        for c in result.claims
        if c.gated and not c.holds and c.name not in known
    ]
    assert not failed, f"gated claims failed: {failed}; notes: {result.notes}"


def test_known_failures_name_implemented_papers():
    assert set(KNOWN_FAILING_AT_DEFAULT) <= set(IMPLEMENTED)
    assert set(NEEDS_ASSET_AT_DEFAULT) <= set(IMPLEMENTED)
    assert all(reason for claims in KNOWN_FAILING_AT_DEFAULT.values() for reason in claims.values())
