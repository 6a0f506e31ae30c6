"""``make gpu-check`` (issue 29, item 2): the smoke presets, library components and the real model on a CUDA device.

Three parts, every test marked ``gpu`` (skipped by tests/conftest.py when CUDA is absent):

- every implemented paper's smoke preset runs with ``device=cuda`` to the end, with finite (or NaN-by-design)
  metrics, and ``env.json`` names the device and the card;
- a set of library components runs the same seeded model and inputs on the CPU and on the device: outputs live on
  the device (or on the CPU where the component returns CPU results by design) and agree with the CPU values
  within a float32 tolerance;
- the Gemma 3 270M package model on the device gives the CPU model's last-position logits, and steering along a
  token's unembedding row raises that token's logit.

The device under test is ``ICLR26_GPU_CHECK_DEVICE`` (default ``cuda``). ``ICLR26_GPU_CHECK_DEVICE=cpu`` runs the
whole file on the CPU without CUDA (conftest then keeps the ``gpu`` tests): a dry run of the test logic, where the
CPU-vs-device comparisons are trivially equal. tests/test_device_meta.py checks the same components on ``meta``
on the CPU-only CI (device placement only, no values).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable

import pytest
import torch
from torch import nn

from iclr26 import registry

DEVICE = torch.device(os.environ.get("ICLR26_GPU_CHECK_DEVICE", "cuda"))
CPU = torch.device("cpu")

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _device_present():
    if DEVICE.type == "cuda" and not torch.cuda.is_available():
        pytest.skip(f"ICLR26_GPU_CHECK_DEVICE={DEVICE}: CUDA is not available")
    if DEVICE.type == "cuda" and (DEVICE.index or 0) >= torch.cuda.device_count():
        pytest.fail(f"ICLR26_GPU_CHECK_DEVICE={DEVICE}: only {torch.cuda.device_count()} CUDA device(s)")


def _on_device(t: torch.Tensor, dev: torch.device) -> bool:
    """``t`` is on ``dev`` (``cuda`` without an index means the current CUDA device)."""
    if t.device.type != dev.type:
        return False
    return dev.index is None or t.device.index == dev.index


# ---------------------------------------------------------------------------------------------- smoke presets
IMPLEMENTED = registry.implemented()


@pytest.mark.parametrize("slug", IMPLEMENTED)
def test_smoke_preset_on_device(slug, tmp_path):
    """The smoke preset with ``--device`` DEVICE runs to the end and writes every file; every metric is a number
    (NaN is the one spelling of "undefined here", infinities are bugs, as in tests/test_common.py) and env.json
    records the device (and, on CUDA, the card's name)."""
    from iclr26.core.errors import MissingAssetError
    from iclr26.engine import run_paper

    try:
        run_dir, result = run_paper(slug, preset="smoke", out=tmp_path, device=str(DEVICE))
    except MissingAssetError as e:
        pytest.skip(f"{slug}: optional asset missing: {e}")
    for name in ("config.json", "metrics.json", "claims.json", "env.json", "report.md"):
        assert (run_dir / name).exists(), name
    metrics = json.loads((run_dir / "metrics.json").read_text())
    bad = [k for k, v in metrics.items() if not isinstance(v, (int, float)) or math.isinf(v)]
    assert not bad, f"{slug} on {DEVICE}: infinite or non-numeric metrics: {bad}"
    claims = json.loads((run_dir / "claims.json").read_text())["claims"]
    assert claims and all({"name", "statement", "estimate", "null", "threshold", "verdict"} <= set(c) for c in claims)
    env = json.loads((run_dir / "env.json").read_text())
    assert env["device"] == str(DEVICE), f"env.json records device {env['device']!r}, the run asked for {DEVICE}"
    if DEVICE.type == "cuda":
        assert env["cuda"], "env.json names no CUDA card"


# ---------------------------------------------------------------------------------------------- components
# Float32 on both sides. The device sums in another order (blocked GEMMs, tree reductions, atomics in scatter),
# so results differ from the CPU's by float32 rounding: a few ulps per op (~1e-7 relative) grown over a handful of
# layers. rtol 1e-4 / atol 1e-5 is about a hundred times the rounding these small models show: the CPU's float32
# results differ from the same case run in float64 by at most 1/20 of this tolerance (the SAEs, whose outputs sum
# ~50 active latents), most cases by under 1/200. The iterated samplers (DDIM, ODE solves) carry the error of
# every step into the next and DDIM's first step divides by sqrt(alpha_bar_T) ~ 1e-2, so they get 1e-3 / 1e-4. TF32 is switched off for the comparisons (cuDNN convolutions use it by default: ~1e-3 relative error).
TOL = {"rtol": 1e-4, "atol": 1e-5}
TOL_ITERATED = {"rtol": 1e-3, "atol": 1e-4}
B, T, D, VOCAB = 2, 6, 32, 64


@pytest.fixture
def ieee_fp32():
    """Full-precision float32 matmuls and convolutions on CUDA while the test runs (TF32 off).

    The ``allow_tf32`` flags, not torch 2.9's ``fp32_precision`` settings: in torch 2.13 setting the cuDNN ones makes
    the legacy ``torch.backends.cudnn.allow_tf32`` getter raise (a mix of the two APIs), and the legacy flags work in
    every torch the Makefile allows (>= 2.4)."""
    if DEVICE.type != "cuda":
        yield
        return
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


Outputs = dict[str, torch.Tensor]


class Case:
    """A component run: ``fn(dev) -> {name: tensor}`` with a model built on the CPU from a fixed seed and moved
    to ``dev``, and inputs drawn on the CPU from a fixed generator and moved to ``dev``. ``on_cpu``: outputs
    returned on the CPU by design (``"*"``: all of them). ``compare(have, want)`` replaces the default check
    (``assert_close`` with ``tol``)."""

    def __init__(self, fn: Callable[[torch.device], Outputs], tol: dict | None = None, on_cpu: tuple | str = (),
                 compare: Callable[[torch.Tensor, torch.Tensor], None] | None = None):
        self.fn, self.tol, self.on_cpu, self.compare = fn, tol or TOL, on_cpu, compare


CASES: dict[str, Case] = {}


def case(name: str, **kw):
    def register(fn):
        assert name not in CASES, name
        CASES[name] = Case(fn, **kw)
        return fn

    return register


def randn(*shape: int, seed: int = 0, scale: float = 1.0, dev: torch.device = CPU) -> torch.Tensor:
    return (torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale).to(dev)


def seeded(module_fn: Callable[[], nn.Module], seed: int = 0) -> nn.Module:
    """Build a module with torch's default initialisation from ``seed`` (global RNG state left untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return module_fn()


def randomize_(module: nn.Module, seed: int = 0, scale: float = 0.3) -> nn.Module:
    """Overwrite every parameter with seeded normal draws (for modules that start at zero, e.g. SAEs)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * scale)
    return module


def sort_topk(acts: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """TopK in index order: ``topk(sorted=False)`` (and numpy's argpartition on the CPU) return any order."""
    idx, order = idx.sort(-1)
    return acts.gather(-1, order), idx


def ids(dev: torch.device, seed: int = 0) -> torch.Tensor:
    return torch.randint(4, VOCAB, (B, T), generator=torch.Generator().manual_seed(seed)).to(dev)


# ---------------------------------------------------------------------------------------------- interp
def _sae(activation: str, dev: torch.device, **kw):
    from iclr26.interp import SparseDictionary

    k = 6 if activation == "topk" else None
    sae = randomize_(SparseDictionary(D, 96, activation=activation, k=k, **kw), seed=3)
    if activation == "jumprelu":
        with torch.no_grad():
            sae.threshold.abs_()  # thresholds > 0, as a trained JumpReLU's
    return sae.to(dev)


@case("interp.SparseDictionary[topk]/encode_topk/decode_topk/topk_autoencode")
def _(dev):
    from iclr26.interp.topk_kernel import topk_autoencode

    sae, x = _sae("topk", dev), randn(B, T, D, seed=1, dev=dev)
    x_hat, f = sae(x)
    acts, idx = sort_topk(*sae.encode_topk(x))
    with torch.no_grad():  # the CPU path selects with numpy's argpartition, CUDA with torch.topk
        recon, k_acts, k_idx = topk_autoencode(sae, x.reshape(-1, D))
    k_acts, k_idx = sort_topk(k_acts, k_idx)
    return {"x_hat": x_hat, "f": f, "acts": acts, "idx": idx, "decode_topk": sae.decode_topk(acts, idx),
            "ae_recon": recon, "ae_acts": k_acts, "ae_idx": k_idx}


@case("interp.SparseDictionary[jumprelu]/encode/decode")
def _(dev):
    sae, x = _sae("jumprelu", dev, input_scale=2.0), randn(B, T, D, seed=2, dev=dev)
    x_hat, f = sae(x)
    assert bool((f > 0).any()) and bool((f == 0).any()), "the threshold should keep some latents, not all"
    return {"x_hat": x_hat, "f": f, "decode": sae.decode(sae.encode(x))}


def _lm(family: str, dev: torch.device) -> nn.Module:
    from iclr26.lm import tiny_lm

    return tiny_lm(family, d=D, layers=2, heads=4, vocab=VOCAB, seed=5).to(dev)


@case("interp.steer[llama]")
def _(dev):
    from iclr26.interp import steer

    m, x = _lm("llama", dev), ids(dev)
    with torch.no_grad():
        plain = m(input_ids=x).logits
        with steer(m, "layers.0.resid_post", randn(D, seed=7), alpha=2.0, positions=[1, 3]):  # CPU vector
            steered = m(input_ids=x).logits
    assert not torch.allclose(plain, steered)
    return {"plain": plain, "steered": steered}


@case("interp.ablate_direction[gpt2]")
def _(dev):
    from iclr26.interp import ablate_direction, replace_sites
    from iclr26.interp.interventions import project

    m, x, r = _lm("gpt2", dev), ids(dev, seed=1), randn(D, seed=8, dev=dev)
    seen = {}

    def read(h):
        seen["h"] = h

    with torch.no_grad(), ablate_direction(m, ["layers.0.resid_post", "layers.1.resid_post"], r):
        with replace_sites(m, {"layers.1.resid_post": read}):
            logits = m(input_ids=x).logits
    # the hook registered after the ablation sees the ablated residual: no component along r is left
    assert project(seen["h"], r).abs().max() < 1e-4 * seen["h"].abs().max()
    return {"logits": logits, "resid": seen["h"]}


@case("interp.sae_edit[llama,topk]")
def _(dev):
    from iclr26.interp import sae_edit
    from iclr26.interp.sae_edit import scale, zero

    m, x = _lm("llama", dev), ids(dev, seed=2)
    sae = _sae("topk", dev)
    sae.input_site = "layers.0.resid_post"
    out = {}
    with torch.no_grad():
        for name, edit in (("scale", scale([1, 4], 5.0)), ("zero", zero([0, 2, 7]))):
            with sae_edit(m, sae, edit, positions="all"):
                out[name] = m(input_ids=x).logits
    return out


@case("interp.diff_of_means/cosine_profile")
def _(dev):
    from iclr26.interp import diff_of_means
    from iclr26.interp.interventions import cosine_profile

    pos, neg = randn(3, 40, D, seed=1, dev=dev) + 0.5, randn(3, 30, D, seed=2, dev=dev)
    r, r_hat = diff_of_means(pos, neg)
    return {"r": r, "r_hat": r_hat, "cos": cosine_profile(r, r_hat)}


@case("interp.attribution.act_x_grad/atp", on_cpu="*")
def _(dev):
    from iclr26.interp.attribution import act_x_grad, atp, gold_prob

    m = _lm("llama", dev)
    batch = {"input_ids": ids(CPU, seed=3), "attention_mask": torch.ones(B, T, dtype=torch.long)}
    metric = gold_prob(torch.tensor([5, 9]))
    sites = ["layers.0.resid_post", "layers.1.mlp.act"]
    axg = act_x_grad(m, batch, sites, metric, reduce_pos="sum")
    ap = atp(m, batch, sites, metric, reduce_pos="sum")
    # scores (and the clean metric) are gathered on the CPU in fp32 by design (Attribution's docstring)
    return {"axg_resid": axg["layers.0.resid_post"], "axg_mlp": axg["layers.1.mlp.act"],
            "atp_resid": ap["layers.0.resid_post"], "metric": axg.metric, "atp_metric": ap.metric}


@case("interp.capture", on_cpu="*")
def _(dev):
    from iclr26.interp import capture

    m = _lm("gpt2", dev)
    batch = {"input_ids": ids(CPU, seed=4), "attention_mask": torch.ones(B, T, dtype=torch.long)}
    cap = capture(m, batch, ["layers.0.resid_post", "layers.1.attn.q", "logits"], stop_after=False)
    mean = capture(m, batch, "layers.1.resid_post", reduce="mean")
    # activations are detached and stored on the CPU by design (capture's docstring)
    return {"resid": cap["layers.0.resid_post"], "q": cap["layers.1.attn.q"], "logits": cap["logits"],
            "mean": mean["layers.1.resid_post"]}


# ---------------------------------------------------------------------------------------------- diffusion
@case("diffusion.DDPM[unet2d]/ddim_sample", tol=TOL_ITERATED)
def _(dev):
    from iclr26.diffusion import DDPM, DDPMConfig, ddim_sample

    cfg = DDPMConfig(backbone="unet2d", sample_size=8, in_channels=1, n_cond=0, block_out_channels=(8, 16),
                     layers_per_block=1, norm_num_groups=4)
    m = seeded(lambda: DDPM(cfg)).to(dev).eval()
    noise = randn(B, 1, 8, 8, seed=5, dev=dev)
    with torch.no_grad():
        eps = m(noise, torch.tensor([10, 500], device=dev))
        x = ddim_sample(m, noise, steps=4)
    return {"eps": eps, "ddim": x}


# ---------------------------------------------------------------------------------------------- architectures
def _spd(n: int, dev: torch.device, seed: int = 0) -> torch.Tensor:
    g = randn(B, n, n, seed=seed)
    return (g @ g.transpose(1, 2) / n + torch.eye(n)).to(dev)


@case("architectures.RangeFormer[linear,softmax]")
def _(dev):
    from iclr26.architectures.rangeformer import RangeFormer

    a, mask = _spd(T, dev, seed=6), torch.ones(B, T, dtype=torch.bool, device=dev)
    mask[1, -2:] = False  # a padded matrix
    omega = randn(B, T, 4, seed=7, dev=dev)  # the sketch given, so no random draw differs between devices
    out = {}
    for attn in ("linear", "softmax"):
        m = seeded(lambda attn=attn: RangeFormer(d=16, k=4, heads=2, loops=2, attn=attn)).to(dev).eval()
        with torch.no_grad():
            out[attn] = m(a, mask, omega=omega, return_all=True)
    return out


@case("architectures.HyperSETEncoder/energy")
def _(dev):
    from iclr26.architectures.hyper_set import HyperSETConfig, HyperSETEncoder

    cfg = HyperSETConfig(d=16, heads=2, mlp_hidden=24, n_recur=3, time_dim=8, lora_rank=2, input_cond=True)
    m = seeded(lambda: HyperSETEncoder(cfg)).to(dev).eval()
    x, mask = randn(B, T, 16, seed=8, dev=dev), torch.ones(B, T, dtype=torch.bool, device=dev)
    mask[0, -1] = False
    with torch.no_grad():
        y, trace = m(x, mask=mask, return_trace=True)
        e = m.energy(x, mask=mask)
    return {"y": y, "trace1": trace[1], "energy": e["total"]}


# ---------------------------------------------------------------------------------------------- flows
@case("flows.odeint/sample[MLPVelocity]", tol=TOL_ITERATED)
def _(dev):
    from iclr26.flows import MLPVelocity, odeint, sample

    v = seeded(lambda: MLPVelocity(8, hidden=32, depth=2, time_dim=8)).to(dev).eval()
    x0 = randn(5, 8, seed=9, dev=dev)
    with torch.no_grad():
        return {"rk4_back": odeint(v, x0, t0=1.0, t1=0.0, steps=8, method="rk4"),
                "euler": sample(v, x0, steps=10), "midpoint": sample(v, x0, steps=6, method="midpoint")}


# ---------------------------------------------------------------------------------------------- merging
@case("merging.task_arithmetic")
def _(dev):
    from iclr26.merging import task_arithmetic

    def mlp(seed):
        return seeded(lambda: nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3)), seed=seed).to(dev)

    base, fts = mlp(0), [mlp(1), mlp(2)]
    merged = task_arithmetic(base, fts, scaling=0.4)
    sd = task_arithmetic(base.state_dict(), [f.state_dict() for f in fts])
    return {**{f"module.{k}": v.detach() for k, v in merged.state_dict().items()},
            **{f"state.{k}": v for k, v in sd.items()}}


# ---------------------------------------------------------------------------------------------- poisoning
@case("poisoning.defenses/FeatureCNN")
def _(dev):
    from iclr26 import poisoning as po

    X = randn(B, 3, 8, 8, seed=10, dev=dev).sigmoid()
    out = {f"preprocess.{d}": po.preprocess(X, d) for d in ("blur", "median", "bits")}
    cnn = seeded(lambda: po.FeatureCNN(3, (8, 8), 4)).to(dev).eval()
    with torch.no_grad():
        feats, logits = po.features_and_logits(cnn, X)
    return {**out, "feats": feats, "logits": logits}


PGD_EPS, PGD_STEPS, PGD_STEP = 0.05, 2, 0.02


def _compare_pgd(have: torch.Tensor, want: torch.Tensor) -> None:
    """PGD steps by the gradient's sign, so an entry whose gradient is within rounding of 0 may step the other way
    on the device (none did under a 1e-6 relative weight perturbation on the CPU): at most 1 % of the entries may
    differ, each by at most the steps taken."""
    off = ~torch.isclose(have, want, **TOL)
    assert float(off.float().mean()) <= 0.01, f"{int(off.sum())} of {off.numel()} PGD entries differ"
    assert float((have - want).abs().max()) <= 2 * PGD_STEPS * PGD_STEP + 1e-6


@case("poisoning.pgd_attack", compare=_compare_pgd)
def _(dev):
    from iclr26 import poisoning as po

    X = randn(4, 3, 8, 8, seed=11, dev=dev).sigmoid()
    y = torch.tensor([0, 1, 2, 3], device=dev)
    cnn = seeded(lambda: po.FeatureCNN(3, (8, 8), 4)).to(dev)
    # the random start is drawn from a CPU generator by design (the same start on every device)
    adv = po.pgd_attack(cnn, X, y, eps=PGD_EPS, steps=PGD_STEPS, step_size=PGD_STEP,
                        generator=torch.Generator().manual_seed(0))
    assert float((adv - X).abs().max()) <= PGD_EPS + 1e-6 and float(adv.min()) >= 0 and float(adv.max()) <= 1
    return {"adv": adv}


# ---------------------------------------------------------------------------------------------- motion / graphs
@case("motion.HumofModel")
def _(dev):
    from iclr26.motion.humof import HumofConfig, HumofModel

    cfg = HumofConfig(joints=4, past=4, future=4, dct_n=4, contact_dct=2, gcn_hidden=8, gcn_stages=1,
                      coarse_dim=8, fine_dim=8, heads=2, ffn_mult=1, coarse_layers=1, fine_layers=1, se_hidden=2)
    m = seeded(lambda: HumofModel(cfg)).to(dev).eval()
    batch = {"ego": randn(B, 4, 4, 3, seed=1), "future": randn(B, 4, 4, 3, seed=2),
             "others": randn(B, 2, 4, 4, 3, seed=3), "others_mask": torch.tensor([[True, False], [True, True]]),
             "points": randn(B, 2, 8, 3, seed=4), "boxes": randn(B, 2, 6, seed=5).abs(),
             "boxes_mask": torch.tensor([[True, True], [False, True]])}
    with torch.no_grad():
        return {"pred": m({k: v.to(dev) for k, v in batch.items()})}


@case("graphs.SEGNN[linear,gnn]")
def _(dev):
    pytest.importorskip("torch_geometric")
    from torch_geometric.data import Batch, Data

    from iclr26.graphs.segnn import SEGNN

    ei = torch.tensor([[0, 1, 2, 3, 1], [1, 2, 3, 4, 0]])
    graphs = [Data(x=randn(5, 3, seed=20 + i), edge_index=ei) for i in range(3)]
    batch = Batch.from_data_list(graphs).to(dev)
    out = {}
    for cls in ("linear", "gnn"):
        m = seeded(lambda cls=cls: SEGNN(3, 2, hidden=8, classifier=cls)).to(dev).eval()
        with torch.no_grad():
            out[f"{cls}.probs"], out[f"{cls}.scores"] = m(batch)
    return out


# ---------------------------------------------------------------------------------------------- rl
@case("rl.ampo_advantages/grpo_advantages", on_cpu="*")
def _(dev):
    from iclr26.rl import ampo_advantages, grpo_advantages

    g = torch.Generator().manual_seed(12)
    n = 32
    rewards = torch.rand(n, generator=g).to(dev)
    lengths = torch.randint(1, 300, (n,), generator=g).to(dev)
    modes = torch.tensor([1, 1, 2, 2, 3, 3, 4, 4] * 4).to(dev)
    groups = torch.arange(4).repeat_interleave(8).to(dev)
    a = ampo_advantages(rewards, lengths, modes, groups)
    # the module docstring: computed in float32 on the CPU from inputs on any device
    assert a.dtype == torch.float32 and a.shape == (n,)
    return {"ampo": a, "grpo": grpo_advantages(rewards, groups)}


def _check_placement(outs: Outputs, on_cpu: tuple | str, dev: torch.device) -> None:
    for name, t in outs.items():
        want = CPU if on_cpu == "*" or name in on_cpu else dev
        assert isinstance(t, torch.Tensor), f"{name} is a {type(t).__name__}"
        assert _on_device(t, want), f"{name} is on {t.device}, expected {want}"


@pytest.mark.usefixtures("ieee_fp32")
@pytest.mark.parametrize("name", list(CASES))
def test_component_on_device_matches_cpu(name):
    c = CASES[name]
    ref = c.fn(CPU)
    got = c.fn(DEVICE)
    assert set(got) == set(ref), (sorted(got), sorted(ref))
    _check_placement(got, c.on_cpu, DEVICE)
    for key, want in ref.items():
        have = got[key].detach().to(CPU)
        want = want.detach()
        assert have.shape == want.shape and have.dtype == want.dtype, (key, have.shape, want.shape)
        if c.compare is not None:
            c.compare(have, want)
        elif want.is_floating_point():
            torch.testing.assert_close(have, want, **c.tol, msg=lambda m, key=key: f"{name}: {key}: {m}")
        else:  # indices, masks: exactly equal
            assert torch.equal(have, want), f"{name}: {key} differs"


def test_component_cases_cover_the_packages():
    packages = {"interp", "diffusion", "architectures", "flows", "merging", "poisoning", "motion", "graphs", "rl"}
    assert packages <= {n.split(".")[0] for n in CASES}


# ---------------------------------------------------------------------------------------------- real model
# Gemma 3 270M (18 layers, residual norms ~4e4, logits ~20): on the CPU the float32 logits are within 1e-5 of a
# float64 run, so 2e-3 absolute leaves a hundredfold margin for the device's other summation order.
GEMMA_TOL = {"rtol": 1e-3, "atol": 2e-3}
PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def gemma():
    """``(cpu_model, device_model, tokenizer)``; skipped without the Gemma 3 270M package."""
    from iclr26.core.errors import MissingAssetError
    from iclr26.lm.loading import load_model

    try:
        cpu_model, tok = load_model("gemma-3-270m")
    except MissingAssetError as e:
        pytest.skip(f"Gemma 3 270M not installed: {e}")
    if DEVICE == CPU:
        dev_model = cpu_model
    else:
        dev_model, _ = load_model("gemma-3-270m", device=DEVICE)
    yield cpu_model, dev_model, tok
    del dev_model, cpu_model
    if DEVICE.type == "cuda":
        torch.cuda.empty_cache()


def _last_logits(model: nn.Module, tok, dev: torch.device) -> torch.Tensor:
    enc = tok([PROMPT], return_tensors="pt").to(dev)
    with torch.no_grad():
        return model(**enc).logits[0, -1]


@pytest.mark.real
@pytest.mark.usefixtures("ieee_fp32")
def test_gemma3_logits_on_device_match_cpu(gemma):
    cpu_model, dev_model, tok = gemma
    assert all(_on_device(p, DEVICE) for p in dev_model.parameters())
    got = _last_logits(dev_model, tok, DEVICE)
    assert _on_device(got, DEVICE) and got.dtype == torch.float32
    want = _last_logits(cpu_model, tok, CPU)
    torch.testing.assert_close(got.cpu(), want, **GEMMA_TOL)
    top2 = want.topk(2).values
    if float(top2[0] - top2[1]) > 10 * GEMMA_TOL["atol"]:  # a clear winner: the same next token
        assert int(got.argmax()) == int(want.argmax())


@pytest.mark.real
@pytest.mark.usefixtures("ieee_fp32")
def test_gemma3_steer_on_device_raises_the_token(gemma):
    """A steering vector along a token's unembedding row, added to the last layer's residual stream, raises that
    token's logit (Gemma's residual norms are ~4e4 there, so the vector is scaled to the residual's norm)."""
    from iclr26.interp import capture, steer

    cpu_model, dev_model, tok = gemma
    site = f"layers.{dev_model.config.num_hidden_layers - 1}.resid_post"
    token = tok(" banana", add_special_tokens=False)["input_ids"][0]
    row = dev_model.get_output_embeddings().weight[token].detach()
    direction = row / row.norm()
    resid = capture(dev_model, tok([PROMPT], return_tensors="pt"), site)[site]  # on the CPU by design
    alpha = float(resid[-1].norm())
    plain = _last_logits(dev_model, tok, DEVICE)
    with steer(dev_model, site, direction, alpha=alpha):
        steered = _last_logits(dev_model, tok, DEVICE)
    assert _on_device(steered, DEVICE)
    assert float(steered[token] - plain[token]) > 1.0, (float(plain[token]), float(steered[token]))
    # rank of the token rises too
    assert int((steered > steered[token]).sum()) < int((plain > plain[token]).sum())
    # the same edit on the CPU model gives the same logits
    with steer(cpu_model, site, direction.cpu(), alpha=alpha):
        steered_cpu = _last_logits(cpu_model, tok, CPU)
    torch.testing.assert_close(steered.cpu(), steered_cpu, **GEMMA_TOL)
