"""Device-correctness of the library components on PyTorch's ``meta`` device (issue 29, item 2).

A ``meta`` tensor has a shape and a dtype but no data: an elementwise op that mixes it with a CPU tensor raises,
and ``.cpu()`` / ``.item()`` / ``.numpy()`` on it raise. So each component below is run with its model and inputs
on ``meta``, and a tensor built on the CPU without ``device=`` (then combined with the input), or a hard-coded
``.cpu()``, fails here on the CPU-only CI. Meta kernels are laxer than CUDA about index tensors (their
``gather``, ``index_select`` and ``embedding`` take CPU indices), so every case also runs under ``SameDevice``, a
dispatch mode that applies CUDA's rule: all tensor arguments of an op on one device, except 0-dim CPU tensors
(scalars), the indices of advanced indexing, and copies. Each case returns the tensors it produced with their
expected shapes; the test checks that every one is on ``meta`` with that shape. Cases marked "guard" keep one
argument on the CPU on purpose (a direction, a CPU generator's draw, a band table) to check that the component
moves it to the activation's device.

Two sanity checks read data and are swapped for the same arithmetic without the check (the ``no_data_checks``
fixture): the zero-norm check of ``interventions._unit`` (diff_of_means / project / ablate_direction with a meta
direction) and the SPD check of ``rangeformer._normalise`` (RangeFormer / ChartonEncoder forward). Everything
else runs unchanged.

Not covered: these need the data by design (``.item()`` / ``bool()`` / ``nonzero`` / numpy / scipy / sklearn,
Python floats as results, or CPU storage of their results), so they cannot run on ``meta``:

- interp.capture / Capture / RunningMoments / iter_batches, neurons.max_pooled_activations /
  next_token_logprobs / kl_divergence_at / first_token_attention_argmax, latents.max_pooled_latents,
  planning.last_position_latents / mlp_pairs: capture stores results on the CPU (streamed shards) and selects
  positions with bool masks (nonzero);
- interp.patch with a Capture: sizes the dense tensor from ``int(index.max())``;
- interp.attribution (act_x_grad / atp / atp_ig, gold_prob / logit_diff), latent_attribution.latent_atp_ig,
  unit_scores.unit_scores: the metrics range-check positions with ``.any()`` and results are gathered with
  ``nonzero`` on the CPU;
- planning.edited_logits / random_latents: ``_check_ids`` reads the mask (``bool(...all())``); numpy draws;
- interp.sae_stats, SAETrainer, train_transcoder, match_exact / match_sparse / compare_saes, max_cosine (CPU
  blocks; its callers take ``.numpy()``), LinearProbe / DiffMeansProbe and the probe metrics, neurons unit-set /
  RAS helpers, unit_scores.select_*: training loops, Python floats, scipy / sklearn / numpy;
- HyperSETEncoder.head_angles (bool-mask indexing: nonzero), step_sign_shares (floats);
- rl.grpo_advantages / ampo_advantages / mode_advantages: computed on the CPU in float32 by design (module
  docstring), with torch.unique / bincount / ``int(count.max())``; ModePolicy / NegotiationEnv: numpy;
- merging opcm (``float(tau_m.abs().max())``, SVD split index), wudi (``float(loss)`` per step), nufilt_step /
  nufilt_merge / top_right_singular / null_space_projector (``float(M.abs().max())``), tv_norm (float);
  NUFILT's adapter (``nufilt._Layer``: loss and fused right factor) is covered below;
- flows fit_velocity / FunctionalRectifiedFlow.fit / FunctionalDDPM.fit (training), gaussian_rf_velocity
  (``float(t)``), relative_cov_error / spectrum_mse / value_density_mse / mmd_rbf (floats), the priors'
  samplers (draws from a CPU generator by design; GridGP caches the Cholesky factor by grid values), fdfi (numpy);
- diffusion DDPM.embed / null (range check of the prompt ids), train_ddpm, memorization_score /
  denoising_score (CPU score tensors by design), mitigate_prompt (float history), replication_threshold,
  LSQActivation (``bool(initialized)``, ``float(step)``), calibrate_activations, radial_bands (a CPU table
  from no input), reconstruct (training);
- graphs faithfulness metrics (explain / est / fidelity / robust_fidelity / cf_fidelity / suff_nec): masks
  ``scores >= threshold`` select subgraphs (data-dependent sizes), results are floats;
- sparsity maxent_kl_loss / MaxEntLoss / maxent_targets (class-set range check, bool-mask assignment),
  l1_prune_masks (nonzero), mask_sparsity / mask_jaccard / per_class_recall / loss_barrier (floats),
  predict_logits (CPU logits by design), MaxEntIMP (training);
- poisoning mi (numpy), balanced_batches (nonzero), make_unlearnable / train_classifier / accuracy (training);
- motion fit / metrics (training, numpy).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

META = torch.device("meta")
B, T, D, VOCAB = 2, 5, 32, 64

CASES: dict[str, Callable[[], list[tuple[torch.Tensor, tuple[int, ...]]]]] = {}


def case(name: str):
    def register(fn):
        assert name not in CASES, name
        CASES[name] = fn
        return fn

    return register


def z(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.zeros(*shape, dtype=dtype, device=META)


def ones_mask(*shape: int) -> torch.Tensor:
    return torch.ones(*shape, dtype=torch.bool, device=META)


_aten = torch.ops.aten
# CUDA takes CPU index tensors in advanced indexing (x[idx], x[idx] = v) and copies across devices
_INDEXING = {
    _aten.index.Tensor,
    _aten.index_put.default,
    _aten.index_put_.default,
    _aten._index_put_impl_.default,
}
_COPIES = {
    _aten.copy_.default,
    _aten._to_copy.default,
    _aten.lift_fresh.default,
    _aten.lift_fresh_copy.default,
}


class SameDevice(TorchDispatchMode):
    """Raise when an op gets tensors on two devices (0-dim CPU tensors, indexing indices and copies excepted)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func not in _COPIES:
            checked = [args[0], *args[2:]] if func in _INDEXING else [args, kwargs]
            devices = {
                t.device
                for t in tree_flatten(checked)[0]
                if isinstance(t, torch.Tensor) and not (t.device.type == "cpu" and t.dim() == 0)
            }
            if len(devices) > 1:
                raise RuntimeError(f"{func} got tensors on {sorted(map(str, devices))}")
        return func(*args, **kwargs)


@pytest.fixture
def no_data_checks(monkeypatch):
    """Replace the two data-reading sanity checks by the same arithmetic without the check."""
    from iclr26.architectures import rangeformer
    from iclr26.interp import interventions

    def unit(r):
        return r / r.norm(dim=-1, keepdim=True)

    def normalise(a, mask):
        s = (torch.diagonal(a, dim1=1, dim2=2) * mask).sum(1) / mask.sum(1).clamp(min=1)
        return a / s[:, None, None], s

    monkeypatch.setattr(interventions, "_unit", unit)
    monkeypatch.setattr(rangeformer, "_normalise", normalise)


# ---------------------------------------------------------------------------------------------- interp: hooks
@functools.cache
def _lm(family: str) -> nn.Module:
    from iclr26.lm import tiny_lm

    m = tiny_lm(family, d=D, layers=2, vocab=VOCAB).to(META).eval()
    # no attention mask is passed (building the sdpa mask reads it); without a pad id, transformers does not look
    # for padding in the ids (GPT-2's ``pad_token_id in input_ids`` check reads data)
    m.config.pad_token_id = None
    return m


def _run(model: nn.Module, site: str, width: tuple[int, ...]):
    """Logits of one forward on meta ids, plus the activation ``site`` holds after the edits (read by a hook
    registered after them, so it proves the edit ran and left a meta tensor of the site's shape)."""
    from iclr26.interp import replace_sites

    seen = {}

    def read(x):
        seen["x"] = x  # returning None keeps the value

    with replace_sites(model, {site: read}), torch.no_grad():
        logits = model(input_ids=z(B, T, dtype=torch.long)).logits
    return [(logits, (B, T, VOCAB)), (seen["x"], (B, T, *width))]


FAMILIES = ("llama", "gpt2")
for _fam in FAMILIES:

    @case(f"interp.register_site_hook[{_fam}]")
    def _(fam=_fam):
        from iclr26.interp import hooks, register_site_hook
        from iclr26.lm import get_adapter

        m, got = _lm(fam), {}
        s = get_adapter(m).resolve("layers.0.attn.q")
        with (
            hooks(lambda h: h.append(register_site_hook(s, lambda x: got.setdefault("x", x)))),
            torch.no_grad(),
        ):
            m(input_ids=z(B, T, dtype=torch.long))
        return [(got["x"], (B, T, D))]

    @case(f"interp.replace_sites[{_fam}]")
    def _(fam=_fam):
        from iclr26.interp import replace_sites

        m = _lm(fam)
        with replace_sites(m, {"layers.0.attn.q": lambda x: 2 * x}):
            return _run(m, "layers.0.attn.q", (D,))

    for _pos in ("all", "prompt", "generated", "indices", "mask"):

        @case(f"interp.steer[{_fam},{_pos}]")
        def _(fam=_fam, pos=_pos):
            from iclr26.interp import steer

            positions = {"indices": [1, 3], "mask": torch.tensor([True, False, True, False, True])}.get(
                pos, pos
            )
            m = _lm(fam)
            with steer(m, "layers.1.resid_post", z(D), alpha=2.0, positions=positions):
                return _run(m, "layers.1.resid_post", (D,))

    @case(f"interp.steer[{_fam},cpu-vector-guard]")
    def _(fam=_fam):
        from iclr26.interp import steer

        m = _lm(fam)
        with steer(m, "layers.0.resid_post", torch.ones(D), alpha=0.5, positions="prompt"):
            return _run(m, "layers.0.resid_post", (D,))

    @case(f"interp.ablate_direction[{_fam},cpu-direction-guard]")
    def _(fam=_fam):
        from iclr26.interp import ablate_direction

        m = _lm(fam)
        with ablate_direction(m, ["layers.0.resid_post", "layers.1.resid_post"], torch.ones(D)):
            return _run(m, "layers.1.resid_post", (D,))

    for _mode in ("zero", "mean"):

        @case(f"interp.ablate_heads[{_fam},{_mode}]")
        def _(fam=_fam, mode=_mode):
            from iclr26.interp import ablate_heads

            m = _lm(fam)
            mean = z(4, D // 4) if mode == "mean" else None
            with ablate_heads(m, 1, [0, 2], mode=mode, mean=mean):
                return _run(m, "layers.1.attn.head_out", (4, D // 4))

    @case(f"interp.edit_units[{_fam}]")
    def _(fam=_fam):
        from iclr26.interp import edit_units

        m = _lm(fam)
        site = "layers.0.mlp.up" if fam == "llama" else "layers.0.attn.v"
        with edit_units(m, site, [1, 3], mode="scale", factor=0.5):
            return _run(m, site, (4 * D,) if fam == "llama" else (D,))

    for _pos in (None, "prompt"):

        @case(f"interp.patch[{_fam},{_pos}]")
        def _(fam=_fam, pos=_pos):
            from iclr26.interp import patch

            m = _lm(fam)
            with patch(m, "layers.0.resid_post", z(1, T, D), positions=pos):
                return _run(m, "layers.0.resid_post", (D,))


@case("interp.ablate_direction[meta-direction]")
def _():
    from iclr26.interp import ablate_direction

    m = _lm("llama")
    with ablate_direction(m, "layers.0.resid_post", {"layers.0.resid_post": z(D) + 1}):
        return _run(m, "layers.0.resid_post", (D,))


@case("interp.diff_of_means")
def _():
    from iclr26.interp import diff_of_means

    r, r_hat = diff_of_means(z(4, D), z(3, D))
    rl, rl_hat = diff_of_means(z(2, 4, D), z(2, 3, D))
    return [(r, (D,)), (r_hat, (D,)), (rl, (2, D)), (rl_hat, (2, D))]


@case("interp.cosine_profile")
def _():
    from iclr26.interp.interventions import cosine_profile

    return [(cosine_profile(z(3, D), z(3, D)), (3,)), (cosine_profile(z(D), z(3, D)), (3,))]


@case("interp.project")
def _():
    from iclr26.interp.interventions import project

    return [(project(z(B, T, D), z(D) + 1), (B, T))]


# ---------------------------------------------------------------------------------------------- interp: SAEs
def _sae(activation="topk", **kw):
    from iclr26.interp import SparseDictionary

    k = 4 if activation in ("topk", "batchtopk") else None
    return SparseDictionary(D, 48, activation=activation, k=k, **kw).to(META)


for _act in ("relu", "topk", "batchtopk", "jumprelu"):

    @case(f"interp.SparseDictionary[{_act}]")
    def _(act=_act):
        sae = _sae(act, input_scale=2.0)
        x_hat, f = sae(z(B, T, D))
        return [(x_hat, (B, T, D)), (f, (B, T, 48)), (sae.decode(sae.encode(z(3, D))), (3, D))]


@case("interp.SparseDictionary[skip-transcoder]")
def _():
    sae = _sae("relu", d_out=16, apply_b_dec_to_input=False, skip=True)
    x_hat, f = sae(z(B, T, D))
    return [(x_hat, (B, T, 16)), (f, (B, T, 48))]


@case("interp.SparseDictionary.encode_topk/decode_topk")
def _():
    sae = _sae("topk")
    acts, idx = sae.encode_topk(z(B, T, D))
    return [(acts, (B, T, 4)), (idx, (B, T, 4)), (sae.decode_topk(acts, idx), (B, T, D))]


@case("interp.topk_autoencode")
def _():
    from iclr26.interp.topk_kernel import topk_autoencode

    recon, acts, idx = topk_autoencode(_sae("topk"), z(6, D))
    return [(recon, (6, D)), (acts, (6, 4)), (idx, (6, 4))]


def _edits():
    from iclr26.interp.sae_edit import add_scaled, clamp, scale, zero

    return {
        "zero": zero([1, 2]),
        "scale": scale([1], 5.0),
        "clamp": clamp([3], 1.0),
        "add_scaled-max": add_scaled([2, 5], 4.0),
        "add_scaled-latent_max": add_scaled(2, 1.0, "latent_max"),
        "add_scaled-number": add_scaled([2], 1.0, 3.0),
        "callable": lambda f: 0.5 * f,
    }


for _edit in (
    "zero",
    "scale",
    "clamp",
    "add_scaled-max",
    "add_scaled-latent_max",
    "add_scaled-number",
    "callable",
):
    for _pos in ("all", "generated"):

        @case(f"interp.sae_edit[{_edit},{_pos}]")
        def _(edit=_edit, pos=_pos):
            from iclr26.interp import sae_edit

            m = _lm("llama")
            with sae_edit(m, _sae("topk", input_site="layers.0.resid_post"), _edits()[edit], positions=pos):
                return _run(m, "layers.0.resid_post", (D,))


@case("interp.sae_edit[transcoder]")
def _():
    from iclr26.interp import sae_edit
    from iclr26.interp.sae_edit import zero

    m = _lm("llama")
    tc = _sae(
        "relu", apply_b_dec_to_input=False, input_site="layers.1.mlp.in", output_site="layers.1.mlp.out"
    )
    with sae_edit(m, tc, zero([0, 7]), positions="prompt"):
        return _run(m, "layers.1.mlp.out", (D,))


@case("interp.matching.cosine_matrix")
def _():
    from iclr26.interp.matching import cosine_matrix

    return [(cosine_matrix(z(3, D), z(5, D)), (3, 5))]


@case("interp.neurons.top_m_units")
def _():
    from iclr26.interp.neurons import top_m_units

    return [(top_m_units(z(3, 10), 2), (3, 2)), (top_m_units(z(10), 4), (4,))]


@case("interp.latents.logit_lens_latents")
def _():
    from iclr26.interp.latents import logit_lens_latents

    m = _lm("llama")
    out = logit_lens_latents(
        _sae("relu"), m.get_output_embeddings().weight, [3, 4], top=5, final_norm=m.model.norm
    )
    return [(out, (5,))]


@case("interp.planning.lens_top_tokens")
def _():
    from iclr26.interp.planning import lens_top_tokens

    m = _lm("llama")
    W_U = m.get_output_embeddings().weight
    a = lens_top_tokens(_sae("relu"), W_U, top=3, candidates=[5, 6, 7, 9], final_norm=m.model.norm)
    b = lens_top_tokens(_sae("relu"), W_U, top=2, latents=[0, 4], sign="neg")
    return [(a, (48, 3)), (b, (48, 2))]


@case("interp.planning.select_planning_latents")
def _():
    from iclr26.interp.planning import select_planning_latents

    tops = {0: z(48, 3, dtype=torch.long)}
    out = select_planning_latents({0: z(B, 48)}, tops, [5, 6], extra={0: z(B, 48, dtype=torch.bool)})
    return [(out[0], (B, 48))]


@case("interp.planning.context_hits")
def _():
    from iclr26.interp.planning import context_hits

    return [(context_hits(z(3, 7, 48), z(3, 7, dtype=torch.long), [4, 5], top=4, window=2), (48, 2))]


@case("interp.planning.masks_to_mult/article_prob")
def _():
    from iclr26.interp.planning import article_prob, masks_to_mult

    mult = masks_to_mult({0: z(B, 48, dtype=torch.bool)}, 5.0)
    return [(mult[0], (B, 48)), (article_prob(z(B, VOCAB), [3, 4]), (B,))]


# ---------------------------------------------------------------------------------------------- architectures
def _hyper_cfg(**kw):
    from iclr26.architectures.hyper_set import HyperSETConfig

    return HyperSETConfig(d=16, heads=2, mlp_hidden=24, n_recur=2, time_dim=8, **kw)


for _attn in ("softmax", "linear", "sigmoid"):
    for _ff in ("standard", "gated"):

        @case(f"architectures.HyperSETEncoder[{_attn},{_ff}]")
        def _(attn=_attn, ff=_ff):
            from iclr26.architectures.hyper_set import HyperSETEncoder

            enc = HyperSETEncoder(_hyper_cfg(attn=attn, ff=ff, lora_rank=2, input_cond=True)).to(META)
            x, mask = z(B, T, 16), ones_mask(B, T)
            y, trace = enc(x, mask=mask, return_trace=True)
            e = enc.energy(x, mask=mask, learned_norms=attn == "softmax")
            return [(y, (B, T, 16)), (trace[-1], (B, T, 16)), (e["total"], (B,)), (e["attn"], (B,))]


@case("architectures.HyperSETEncoder[fixed-step]/effective_rank")
def _():
    from iclr26.architectures.hyper_set import HyperSETEncoder, effective_rank

    y = HyperSETEncoder(_hyper_cfg(step="fixed")).to(META)(z(B, T, 16), n_recur=3)
    return [(y, (B, T, 16)), (effective_rank(y), (B,))]


@case("architectures.HyperSETForImageClassification/HyperSETForSudoku")
def _():
    from iclr26.architectures.hyper_set import HyperSETForImageClassification, HyperSETForSudoku

    img = HyperSETForImageClassification(_hyper_cfg(), image_size=8, patch=4).to(META)
    sud = HyperSETForSudoku(_hyper_cfg(), cells=16, digits=4).to(META)
    return [(img(z(B, 8, 8)), (B, 10)), (sud(z(B, 16, dtype=torch.long)), (B, 16, 4))]


@case("architectures.vit")
def _():
    from iclr26.architectures.vit import TransformerForSudoku, ViTConfig, ViTForImageClassification, predict

    img = ViTForImageClassification(ViTConfig(d=16, heads=2, mlp_hidden=24, depth=2), image_size=8, patch=4)
    sud = TransformerForSudoku(
        ViTConfig(d=16, heads=2, mlp_hidden=24, depth=2, looped=True), cells=16, digits=4
    )
    img, sud = img.to(META), sud.to(META)
    return [
        (predict(img, z(3, 8, 8), batch_size=2), (3,)),
        (sud(z(B, 16, dtype=torch.long), n_recur=3), (B, 16, 4)),
    ]


def _rangeformer(**kw):
    from iclr26.architectures.rangeformer import RangeFormer, RangeFormerConfig

    return RangeFormer(RangeFormerConfig(d=16, k=4, heads=2, loops=2, **kw)).to(META)


for _attn in ("linear", "softmax"):
    for _task in ("logdet", "solve"):

        @case(f"architectures.RangeFormer[{_attn},{_task}]")
        def _(attn=_attn, task=_task):
            m = _rangeformer(attn=attn, task=task, feature_map="elu", tied=attn == "linear")
            a, mask, b = z(B, T, T), ones_mask(B, T), (z(B, T) if task == "solve" else None)
            out_shape = (B, T) if task == "solve" else (B,)
            g = torch.Generator().manual_seed(0)  # a CPU generator: sketch draws omega there (guard)
            return [
                (m.sketch(a, mask, generator=g, b=b), (B, T, 1 + 2 * 4 + (2 if b is not None else 0))),
                (m(a, mask, b=b, generator=g), out_shape),
                (m(a, mask, b=b, omega=z(B, T, 4), loops=2, return_all=True), (2, *out_shape)),
            ]


@case("architectures.RangeFormer.predict")
def _():  # predict seeds a CPU generator for the sketches (guard)
    return [(_rangeformer().predict(z(B, T, T), ones_mask(B, T), draws=2), (B,))]


@case("architectures.ChartonEncoder")
def _():
    from iclr26.architectures.rangeformer import ChartonConfig, ChartonEncoder, p1000_encode

    m = ChartonEncoder(ChartonConfig(d=16, heads=2, layers=1, max_n=6)).to(META)
    sign, mant, expo = p1000_encode(z(B, T, T))
    return [(m(z(B, T, T), ones_mask(B, T)), (B,)), (sign, (B, T, T)), (mant, (B, T, T)), (expo, (B, T, T))]


@case("architectures.rangeformer.LinearAttention/SoftmaxAttention")
def _():
    from iclr26.architectures.rangeformer import LinearAttention, SoftmaxAttention

    x, mask = z(B, T, 16), ones_mask(B, T)
    lin, soft = LinearAttention(16, 2, "elu").to(META), SoftmaxAttention(16, 2).to(META)
    return [(lin(x, mask), (B, T, 16)), (soft(x, mask), (B, T, 16))]


@case("architectures.rangeformer.slq_logdet")
def _():
    from iclr26.architectures.rangeformer import slq_logdet

    return [(slq_logdet(z(B, T, T, dtype=torch.float64), steps=3, probes=2), (B,))]


# ---------------------------------------------------------------------------------------------- flows
def _guard_velocity(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """A velocity that uses ``t`` as given: a CPU ``t`` with a meta ``x`` raises."""
    return x * t[:, None]


@case("flows.interpolate")
def _():
    from iclr26.flows import interpolate

    xt, target = interpolate(z(3, 8), z(3, 8), z(3), sigma_min=0.1)
    return [(xt, (3, 8)), (target, (3, 8))]


for _method in ("euler", "midpoint", "rk4"):

    @case(f"flows.odeint[{_method}]")
    def _(method=_method):
        from iclr26.flows import MLPVelocity, odeint

        mv = MLPVelocity(8, hidden=8, depth=1, time_dim=4).to(META)
        return [
            (odeint(_guard_velocity, z(3, 8), steps=2, method=method), (3, 8)),
            (odeint(mv, z(3, 8), t0=1.0, t1=0.0, steps=2, method=method), (3, 8)),
        ]


@case("flows.sample/encode/reflow_pairs")
def _():
    from iclr26.flows import MLPVelocity, encode, reflow_pairs, sample

    mv = MLPVelocity(8, hidden=8, depth=1, time_dim=5).to(META)
    x0, x1 = reflow_pairs(mv, z(3, 8), steps=2)
    return [
        (sample(mv, z(3, 8), steps=2), (3, 8)),
        (encode(mv, z(3, 8), steps=2), (3, 8)),
        (x0, (3, 8)),
        (x1, (3, 8)),
    ]


@case("flows.FNO1d/SpectralConv1d/timestep_embedding")
def _():
    from iclr26.flows import FNO1d, SpectralConv1d
    from iclr26.flows.core import timestep_embedding

    fno = FNO1d(modes=3, width=4, n_layers=1, time_dim=4).to(META)
    spec = SpectralConv1d(2, 3, 2).to(META)
    return [
        (fno(z(3, 8), z(3)), (3, 8)),
        (spec(z(3, 8, 2)), (3, 8, 3)),
        (timestep_embedding(z(3), 5), (3, 5)),
    ]


@case("flows.straightness")
def _():
    from iclr26.flows import straightness

    return [(straightness(_guard_velocity, z(3, 8), steps=3, per_sample=True), (3,))]


@case("flows.functional_sq_norm/functional_loss/X1Prediction/mean_power_spectrum")
def _():
    from iclr26.flows import FNO1d, X1Prediction, functional_loss, functional_sq_norm, mean_power_spectrum

    x1p = X1Prediction(FNO1d(modes=2, width=4, n_layers=1, time_dim=4)).to(META)
    return [
        (functional_sq_norm(z(3, 8), freq_weights=z(5) + 1), (3,)),
        (functional_loss(z(3, 8), z(3, 8)), (3,)),
        (x1p(z(3, 8), z(3)), (3, 8)),
        (mean_power_spectrum(z(3, 8)), (5,)),
    ]


@case("flows.priors.matern_kernel/rbf_kernel/LogitNormal.pdf")
def _():
    from iclr26.flows import LogitNormal, matern_kernel, rbf_kernel

    return [
        (matern_kernel(z(4), z(5), nu=2.5), (4, 5)),
        (rbf_kernel(z(4), z(5)), (4, 5)),
        (LogitNormal().pdf(z(6)), (6,)),
    ]


@case("flows.diffusion.ddim_sample/cosine_alpha_bar")
def _():
    from iclr26.flows.diffusion import cosine_alpha_bar, ddim_sample

    def denoise(x, t):  # guard: uses t as given
        return x * t[:, None], x

    return [(ddim_sample(denoise, z(3, 8), steps=3), (3, 8)), (cosine_alpha_bar(z(4)), (4,))]


# ---------------------------------------------------------------------------------------------- diffusion
def _ddpm(backbone: str, n_cond: int = 3):
    from iclr26.diffusion import DDPM, DDPMConfig

    cfg = DDPMConfig(
        backbone=backbone,
        sample_size=8,
        in_channels=1,
        n_cond=n_cond,
        block_out_channels=(8, 16),
        layers_per_block=1,
        norm_num_groups=4,
        hidden=16,
        depth=1,
        t_dim=8,
        cond_dim=8,
        cond_tokens=2,
    )
    return DDPM(cfg).to(META)


for _bb in ("mlp", "unet2d", "unet2dcond"):

    @case(f"diffusion.DDPM/cfg_eps[{_bb}]")
    def _(bb=_bb):
        from iclr26.diffusion import cfg_eps

        m = _ddpm(bb)
        x, c = z(B, 1, 8, 8), z(B, m.cond_width)
        guided, eps_u, eps_c = cfg_eps(m, x, 7, c, c, guidance=2.0)
        return [
            (m(x, torch.tensor([3, 5], device=META), c), (B, 1, 8, 8)),
            (guided, (B, 1, 8, 8)),
            (eps_u, (B, 1, 8, 8)),
        ]


@case("diffusion.ddim_sample")
def _():
    from iclr26.diffusion import ddim_sample

    return [(ddim_sample(_ddpm("mlp", n_cond=0), z(B, 1, 8, 8), steps=2), (B, 1, 8, 8))]


@case("diffusion.ptq.ddim_generate/collect_calibration")
def _():
    from iclr26.diffusion.ptq import collect_calibration, ddim_generate

    m = _ddpm("mlp", n_cond=0)
    x, rec = ddim_generate(m, m.ddim_scheduler(), z(3, 1, 8, 8), 2, batch=2, record=True)
    # collect_calibration draws its noise from a CPU generator and moves it to the model (guard)
    cal = collect_calibration(m, m.ddim_scheduler(), 2, 3, 3, sample_shape=(1, 8, 8), seed=0)
    return [(x, (3, 1, 8, 8)), (rec[-1][2], (1, 1, 8, 8))] + [
        (getattr(cal, k), shape)
        for k, shape in (
            ("x", (6, 1, 8, 8)),
            ("t", (6,)),
            ("eps", (6, 1, 8, 8)),
            ("group", (6,)),
            ("step", (6,)),
        )
    ]


@case("diffusion.q_sample/images_to_latents/latents_to_images/nearest_distance")
def _():
    from iclr26.diffusion import images_to_latents, latents_to_images, nearest_distance, q_sample

    xt, v = q_sample(z(10), z(B, 4, 2, 2), z(B, 4, 2, 2), torch.tensor([1, 2], device=META), "v_prediction")
    lat = images_to_latents(z(B, 4, 4))
    return [
        (xt, (B, 4, 2, 2)),
        (v, (B, 4, 2, 2)),
        (lat, (B, 4, 2, 2)),
        (latents_to_images(lat), (B, 4, 4)),
        (nearest_distance(z(3, 1, 4, 4), z(5, 1, 4, 4)), (3,)),
    ]


for _mode in ("soft", "hard", "nearest"):

    @case(f"diffusion.ptq.QuantLayer[{_mode}]")
    def _(mode=_mode):
        from iclr26.diffusion.ptq import QuantLayer

        lin = QuantLayer(nn.Linear(6, 4), 4, 8).to(META)
        conv = QuantLayer(nn.Conv2d(1, 2, 3, padding=1, padding_mode="reflect"), 4, 8).to(META)
        for q in (lin, conv):  # the activation quantizer reads its calibration flag (data): weights only here
            q.aq.enabled, q.wq.mode = False, mode
        return [(lin(z(3, 6)), (3, 4)), (conv(z(B, 1, 5, 5)), (B, 2, 5, 5)), (lin.wq.regularizer(2.0), ())]


@case("diffusion.ptq.AdaRoundWeight")
def _():
    from iclr26.diffusion.ptq import AdaRoundWeight

    q = AdaRoundWeight(z(4, 6), 4)
    return [(q.scale, (4, 1)), (q(z(4, 6)), (4, 6))]


@case("diffusion.ptq.frequency_loss")
def _():
    from iclr26.diffusion.ptq import (
        band_energy,
        band_weights,
        dct2,
        frequency_loss,
        idct2,
        radial_bands,
        sample_weights,
    )

    bands = radial_bands(4, 4, 3)  # a CPU table (guard): band_energy moves it to the error's device
    err = z(B, 1, 4, 4)
    return [
        (idct2(dct2(err)), (B, 1, 4, 4)),
        (band_energy(err, bands), (B, 3)),
        (frequency_loss(err, z(B, dtype=torch.long), bands, band_weights(z(2, 3))), (B,)),
        (sample_weights(z(5)), (5,)),
    ]


# ---------------------------------------------------------------------------------------------- merging
def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3)).to(META)


def _state_shapes(sd) -> list[tuple[torch.Tensor, tuple[int, ...]]]:
    want = {"0.weight": (6, 4), "0.bias": (6,), "2.weight": (3, 6), "2.bias": (3,)}
    assert set(sd) == set(want)
    return [(sd[k], want[k]) for k in want]


@case("merging.task_arithmetic")
def _():
    from iclr26.merging import task_arithmetic

    base, fts = _mlp(), [_mlp(), _mlp()]
    merged = task_arithmetic(base, fts)
    return _state_shapes(merged.state_dict()) + _state_shapes(
        task_arithmetic(base.state_dict(), [fts[0].state_dict()])
    )


for _method in ("task_arithmetic", "weight_average", "ties"):

    @case(f"merging.continual_merge[{_method}]")
    def _(method=_method):
        from iclr26.merging import continual_merge

        return _state_shapes(
            continual_merge(_mlp().state_dict(), [_mlp().state_dict(), _mlp().state_dict()], method)
        )


@case("merging.ties_vectors/task_vector")
def _():
    from iclr26.merging import task_vector, ties_vectors

    tv = task_vector(_mlp().state_dict(), _mlp().state_dict(), ["0.weight"])
    return [(ties_vectors(z(2, 10), merge="mean"), (10,)), (tv["0.weight"], (6, 4))]


@case("merging.nufilt._Layer")
def _():
    from iclr26.merging.nufilt import _Layer

    g = torch.Generator().manual_seed(0)  # NUFILT's CPU generator draws A (guard)
    filt = _Layer("w", z(3, 4), z(3, 4), z(4, 2), z(4, 2), z(4, 2), 2, 0.02, g)
    plain = _Layer("w", z(3, 4), z(3, 4), z(4, 2), z(4, 2), None, 2, 0.02, g)
    return [
        (filt.loss(1.0, 1.0), ()),
        (filt.right_factor(True), (4, 4)),
        (plain.right_factor(False), (4, 4)),
        (plain.A, (2, 4)),
        (plain.B, (4, 2)),
    ]


# ---------------------------------------------------------------------------------------------- sparsity
@case("sparsity.masks/weight_sum/interpolate/LogitAverage/permute_hidden_units")
def _():
    from iclr26.sparsity import subnetworks as sn

    a, b = _mlp(), _mlp()
    masks = sn.ones_masks(a)
    perm, perm_masks = sn.permute_hidden_units(a, masks, generator=torch.Generator().manual_seed(0))
    return (
        _state_shapes(sn.effective_state(a, masks))
        + _state_shapes(sn.weight_sum([a, b], [masks, masks], coefficients=[0.5, 0.5]).state_dict())
        + _state_shapes(sn.interpolate(a, b, 0.3).state_dict())
        + _state_shapes(perm.state_dict())
        + _state_shapes(sn.merge_masks([masks, perm_masks]))
        + [(sn.LogitAverage([a, b])(z(B, 4)), (B, 3))]
    )


# ---------------------------------------------------------------------------------------------- poisoning
@case("poisoning.defenses")
def _():
    from iclr26 import poisoning as po

    X = z(B, 3, 8, 8)
    out = [(po.preprocess(X, d), (B, 3, 8, 8)) for d in po.DEFENSES]
    cut = po.cutout(X, 3, torch.Generator().manual_seed(0))  # CPU generator, mask moved to X (guard)
    return out + [(cut, (B, 3, 8, 8)), (po.median_blur(X, 5), (B, 3, 8, 8))]


@case("poisoning.FeatureCNN/features_and_logits/predict/pgd_attack")
def _():
    from iclr26 import poisoning as po

    cnn = po.FeatureCNN(3, (8, 8), 4).to(META)
    X, y = z(B, 3, 8, 8), z(B, dtype=torch.long)
    feats, logits = po.features_and_logits(cnn, X)
    adv = po.pgd_attack(
        cnn, X, y, eps=0.1, steps=2, step_size=0.05, generator=torch.Generator().manual_seed(0)
    )
    return [(feats, (B, 64)), (logits, (B, 4)), (po.predict(cnn, X, batch_size=1), (B,)), (adv, (B, 3, 8, 8))]


@case("poisoning.mi_loss/project")
def _():
    from iclr26.poisoning import mi_loss, project

    return [
        (mi_loss(z(4, 5), z(4, dtype=torch.long)), ()),
        (project(z(B, 3, 4, 4), z(B, 3, 4, 4), 0.1), (B, 3, 4, 4)),
    ]


# ---------------------------------------------------------------------------------------------- motion
def _humof_batch():
    return {
        "ego": z(B, 4, 4, 3),
        "future": z(B, 4, 4, 3),
        "others": z(B, 2, 4, 4, 3),
        "others_mask": ones_mask(B, 2),
        "points": z(B, 2, 8, 3),
        "boxes": z(B, 2, 6),
        "boxes_mask": ones_mask(B, 2),
    }


for _mode in ("humof", "flat", "ego"):

    @case(f"motion.HumofModel[{_mode}]")
    def _(mode=_mode):
        from iclr26.motion.humof import HumofConfig, HumofModel

        sizes = dict(joints=4, past=4, future=4, dct_n=4, contact_dct=2, gcn_hidden=8, gcn_stages=1)
        widths = dict(
            coarse_dim=8, fine_dim=8, heads=2, ffn_mult=1, coarse_layers=1, fine_layers=1, se_hidden=2
        )
        cfg = HumofConfig(**sizes, **widths, mode=mode)
        return [(HumofModel(cfg).to(META).eval()(_humof_batch()), (B, 4, 4, 3))]


@case("motion.rotate_batch/loss_fn/dct/contact_features")
def _():
    from iclr26.motion import dct
    from iclr26.motion import humof as hm

    rot = hm.rotate_batch(_humof_batch(), z(B))
    seq = dct.tokens_to_seq(dct.joint_tokens(z(B, 8, 4, 3), 4), 8)
    return [
        (rot["ego"], (B, 4, 4, 3)),
        (rot["boxes"], (B, 2, 6)),
        (hm.loss_fn(z(B, 4, 4, 3), z(B, 4, 4, 3)), ()),
        (seq, (B, 8, 4, 3)),
        (hm.contact_features(z(B, 4, 4, 3), z(B, 5, 3), 0.1, 2, 8), (B, 5, 8)),
    ]


# ---------------------------------------------------------------------------------------------- graphs
for _cls in ("linear", "gnn"):

    @case(f"graphs.SEGNN[{_cls}]")
    def _(cls=_cls):
        pytest.importorskip("torch_geometric")
        from torch_geometric.data import Batch, Data

        from iclr26.graphs.segnn import SEGNN

        ei = torch.tensor([[0, 1, 2], [1, 2, 3]])
        batch = Batch.from_data_list([Data(x=torch.zeros(4, 3), edge_index=ei) for _ in range(2)]).to(META)
        probs, scores = SEGNN(3, 2, hidden=8, classifier=cls).to(META)(batch)
        return [(probs, (2, 2)), (scores, (8,))]


# ---------------------------------------------------------------------------------------------- the test
def _check(produced) -> None:
    assert produced, "the case produced nothing"
    for i, (t, shape) in enumerate(produced):
        assert isinstance(t, torch.Tensor), f"output {i} is a {type(t).__name__}, not a tensor"
        assert t.device.type == "meta", f"output {i} is on {t.device}, not on the input's device (meta)"
        assert tuple(t.shape) == tuple(shape), (
            f"output {i} has shape {tuple(t.shape)}, expected {tuple(shape)}"
        )


@pytest.mark.usefixtures("no_data_checks")
@pytest.mark.parametrize("name", list(CASES))
def test_component_stays_on_meta(name):
    with SameDevice():
        produced = CASES[name]()
    _check(produced)


def test_meta_catches_a_cpu_tensor():
    """The premise: a CPU-built tensor mixed with a meta input, or ``.cpu()`` on it, raises; under SameDevice so
    does a CPU index tensor where CUDA wants one device, while CUDA's exceptions stay allowed."""
    with pytest.raises((RuntimeError, NotImplementedError)):
        _ = z(3) + torch.ones(3)
    with pytest.raises((RuntimeError, NotImplementedError)):
        z(3).cpu()
    idx = torch.tensor([0, 1])
    with SameDevice():
        with pytest.raises(RuntimeError, match="got tensors on"):
            z(3, 4).gather(1, idx[None].expand(3, 2))
        with pytest.raises(RuntimeError, match="got tensors on"):
            nn.functional.embedding(idx, z(5, 4))
        x = z(3, 4)
        x[idx] = z(2, 4)  # advanced indexing with CPU indices, a CPU scalar, and a copy: allowed
        _ = x[idx] * torch.tensor(2.0) + torch.ones(4).to(META)


def test_cases_cover_every_package():
    packages = {"interp", "architectures", "flows", "diffusion", "merging", "sparsity", "poisoning", "motion"}
    assert packages | {"graphs"} <= {name.split(".")[0] for name in CASES}
