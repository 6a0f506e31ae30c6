"""Sparse dictionaries (SAEs and transcoders) with encode/decode, edits and loaders.

Used by "Sparse Autoencoders Trained on the Same Data Learn Different Features"
(Paulo & Belrose, ICLR 2026, arXiv 2501.16615) and by the other interpretability papers.
A dictionary maps an activation x [.., d_in] to latents f = act(((x * s) - b_dec·[apply]) W_enc + b_enc)
and back to x_hat = (f W_dec + b_dec) / s. ``act`` is ReLU, TopK (ReLU then keep the k
largest, as sparsify does), BatchTopK (keep the k·batch largest over the batch) or JumpReLU
(keep pre where pre > θ). Loaders read SAELens folders (``cfg.json`` + ``sae_weights.safetensors``)
and sparsify folders (``cfg.json`` + ``sae.safetensors``; encoder applied to x − b_dec except
for transcoders, checked against sparsify 1.3.3), GemmaScope ``params.npz`` (JumpReLU, SAEs and transcoders),
dictionary_learning folders (``ae.pt`` + ``config.json``), circuit-tracer ReLU transcoders (safetensors), and our
own ``cfg.json`` + ``sae.safetensors``. Edits through a dictionary live in :mod:`iclr26.interp.sae_edit`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from iclr26.core.errors import UserError
from iclr26.core.io import load_tensors, save_tensors

log = logging.getLogger(__name__)

ACTIVATIONS = ("relu", "topk", "batchtopk", "jumprelu")
WEIGHTS_FILE = "sae.safetensors"
FORMAT_TAG = "iclr26.SparseDictionary"


class SparseDictionary(nn.Module):
    """A sparse autoencoder / transcoder: ``encode``, ``decode`` and ``forward -> (x_hat, f)``.

    Parameters: ``W_enc [d_in, n]``, ``b_enc [n]``, ``W_dec [n, d_out]``, ``b_dec [d_out]`` and,
    for JumpReLU, ``threshold [n]``. ``input_scale`` multiplies inputs before encoding and divides
    reconstructions (SAELens' "expected average norm" scaling); 1.0 means none. ``skip=True`` adds an
    affine skip ``W_skip [d_in, d_out]`` (skip transcoders: Gemma Scope 2, circuit-tracer):
    ``forward(x) = decode(encode(x)) + x·W_skip``. ``decode`` is the latents' part only, so a latent
    edit's effect ``decode(f') - decode(f)`` is the same with or without the skip.
    """

    def __init__(
        self,
        d_in: int,
        n_latents: int,
        *,
        d_out: int | None = None,
        activation: str = "topk",
        k: int | None = None,
        apply_b_dec_to_input: bool = True,
        input_scale: float = 1.0,
        input_site: str | None = None,
        output_site: str | None = None,
        skip: bool = False,
        dtype: torch.dtype = torch.float32,
    ):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise UserError(f"activation={activation!r} is not supported; allowed: {', '.join(ACTIVATIONS)}")
        if activation in ("topk", "batchtopk") and (k is None or not 0 < int(k) <= n_latents):
            raise UserError(f"activation={activation} needs 0 < k <= n_latents={n_latents}, got k={k}")
        if d_in <= 0 or n_latents <= 0:
            raise UserError(f"d_in and n_latents must be positive, got d_in={d_in}, n_latents={n_latents}")
        d_out = d_in if d_out is None else d_out
        if apply_b_dec_to_input and d_out != d_in:
            raise UserError(
                "apply_b_dec_to_input=True needs d_out == d_in (a transcoder cannot subtract b_dec)"
            )
        self.d_in, self.n_latents, self.d_out = int(d_in), int(n_latents), int(d_out)
        self.activation = activation
        self.k = None if k is None else int(k)
        self.apply_b_dec_to_input = bool(apply_b_dec_to_input)
        self.input_scale = float(input_scale)
        self.input_site = input_site
        self.output_site = output_site
        # The encoder is stored as contiguous rows W_enc_T [n, d_in] (one row per latent, like
        # sparsify's encoder.weight): the sparse TopK backward produces its gradient row by row,
        # embedding_bag gathers rows, and fused Adam needs contiguous parameters. ``W_enc`` is
        # the [d_in, n] view of it.
        self.W_enc_T = nn.Parameter(torch.zeros(n_latents, d_in, dtype=dtype))
        self.b_enc = nn.Parameter(torch.zeros(n_latents, dtype=dtype))
        self.W_dec = nn.Parameter(torch.zeros(n_latents, d_out, dtype=dtype))
        self.b_dec = nn.Parameter(torch.zeros(d_out, dtype=dtype))
        if activation == "jumprelu":
            self.threshold = nn.Parameter(torch.zeros(n_latents, dtype=dtype))
        else:
            self.threshold = None
        self.W_skip = nn.Parameter(torch.zeros(d_in, d_out, dtype=dtype)) if skip else None

    @property
    def W_enc(self) -> torch.Tensor:  # noqa: N802 - the conventional name
        """Encoder matrix ``[d_in, n]`` (a view of ``W_enc_T``; writes go through)."""
        return self.W_enc_T.T

    # ------------------------------------------------------------------ config / IO
    def config(self) -> dict[str, Any]:
        return {
            "format": FORMAT_TAG,
            "d_in": self.d_in,
            "n_latents": self.n_latents,
            "d_out": self.d_out,
            "activation": self.activation,
            "k": self.k,
            "apply_b_dec_to_input": self.apply_b_dec_to_input,
            "input_scale": self.input_scale,
            "input_site": self.input_site,
            "output_site": self.output_site,
            "skip": self.W_skip is not None,
        }

    def save(self, folder: str | Path) -> Path:
        """Write ``folder/sae.safetensors`` and ``folder/cfg.json``; returns the folder."""
        folder = Path(folder)
        tensors = {
            "W_enc": self.W_enc.detach(),
            "b_enc": self.b_enc.detach(),
            "W_dec": self.W_dec.detach(),
            "b_dec": self.b_dec.detach(),
        }
        if self.threshold is not None:
            tensors["threshold"] = self.threshold.detach()
        if self.W_skip is not None:
            tensors["W_skip"] = self.W_skip.detach()
        save_tensors(folder / WEIGHTS_FILE, tensors, self.config())
        return folder

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> SparseDictionary:
        keys = (
            "d_out",
            "activation",
            "k",
            "apply_b_dec_to_input",
            "input_scale",
            "input_site",
            "output_site",
            "skip",
        )
        return cls(int(cfg["d_in"]), int(cfg["n_latents"]), **{k: cfg[k] for k in keys if k in cfg})

    @classmethod
    def load(cls, folder: str | Path) -> SparseDictionary:
        """Load a folder written by :meth:`save`, SAELens or sparsify (format detected from files)."""
        folder = Path(folder)
        if (folder / "sae_weights.safetensors").exists():
            return load_saelens(folder)
        cfg_path = folder / "cfg.json"
        if not cfg_path.exists() or not (folder / WEIGHTS_FILE).exists():
            raise UserError(
                f"{folder} is not an SAE folder: expected cfg.json + sae.safetensors (iclr26/sparsify) "
                "or cfg.json + sae_weights.safetensors (SAELens)"
            )
        cfg = json.loads(cfg_path.read_text())
        if cfg.get("format") != FORMAT_TAG:
            return load_sparsify(folder)
        sae = cls.from_config(cfg)
        sae.load_tensors_(load_tensors(folder / WEIGHTS_FILE))
        return sae

    @torch.no_grad()
    def load_tensors_(self, tensors: dict[str, torch.Tensor]) -> SparseDictionary:
        """Copy ``W_enc [d_in,n]``, ``b_enc``, ``W_dec [n,d_out]``, ``b_dec`` (+ ``threshold``, ``W_skip``) in place."""
        expected = {
            "W_enc": (self.d_in, self.n_latents),
            "b_enc": (self.n_latents,),
            "W_dec": (self.n_latents, self.d_out),
            "b_dec": (self.d_out,),
        }
        if self.threshold is not None:
            expected["threshold"] = (self.n_latents,)
        if self.W_skip is not None:
            expected["W_skip"] = (self.d_in, self.d_out)
        for name, shape in expected.items():
            if name not in tensors:
                raise UserError(f"SAE weights lack {name!r}; found {sorted(tensors)}")
            t = tensors[name]
            if tuple(t.shape) != shape:
                raise UserError(f"SAE weight {name} has shape {tuple(t.shape)}, expected {shape}")
            getattr(self, name).copy_(t.to(getattr(self, name).dtype))
        return self

    # ------------------------------------------------------------------ forward
    def _check_input(self, x: torch.Tensor) -> None:
        if x.shape[-1] != self.d_in:
            raise UserError(f"SAE input has last dimension {x.shape[-1]}, expected d_in={self.d_in}")

    def sae_in(self, x: torch.Tensor) -> torch.Tensor:
        """The encoder's input: ``x * input_scale - b_dec`` (the subtraction only if configured)."""
        x = x.to(self.W_dec.dtype)
        if self.input_scale != 1.0:
            x = x * self.input_scale
        if self.apply_b_dec_to_input:
            x = x - self.b_dec
        return x

    def pre_acts(self, x: torch.Tensor) -> torch.Tensor:
        """Encoder pre-activations ``[.., n]``."""
        self._check_input(x)
        return self.sae_in(x) @ self.W_enc + self.b_enc

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Dense latents ``f [.., n]`` (zeros outside the active set)."""
        pre = self.pre_acts(x)
        if self.activation == "relu":
            return F.relu(pre)
        if self.activation == "jumprelu":
            return F.relu(pre) * (pre > self.threshold)
        if self.activation == "topk":
            vals, idx = F.relu(pre).topk(self.k, dim=-1, sorted=False)
            return torch.zeros_like(pre).scatter_(-1, idx, vals)
        # batchtopk: keep the k·B largest activations over the flattened batch
        flat = F.relu(pre).reshape(-1, self.n_latents)
        keep = min(self.k * flat.shape[0], flat.numel())
        vals, idx = flat.flatten().topk(keep, sorted=False)
        out = torch.zeros_like(flat).flatten().scatter_(0, idx, vals)
        return out.reshape(pre.shape)

    def encode_topk(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """TopK latents in sparse form: ``(acts [.., k], indices [.., k])`` (TopK dictionaries only)."""
        if self.activation != "topk":
            raise UserError(f"encode_topk needs activation='topk', this dictionary uses {self.activation!r}")
        return F.relu(self.pre_acts(x)).topk(self.k, dim=-1, sorted=False)

    def decode(self, f: torch.Tensor) -> torch.Tensor:
        """Reconstruction ``x_hat [.., d_out]`` from dense latents ``f [.., n]``."""
        if f.shape[-1] != self.n_latents:
            raise UserError(f"latents have last dimension {f.shape[-1]}, expected n_latents={self.n_latents}")
        out = f.to(self.W_dec.dtype) @ self.W_dec + self.b_dec
        return out / self.input_scale if self.input_scale != 1.0 else out

    def decode_topk(self, acts: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        """Sparse decode: ``Σ_j acts_j W_dec[idx_j] + b_dec`` via ``embedding_bag`` (no dense [.., n])."""
        shape = acts.shape[:-1]
        out = F.embedding_bag(
            idx.reshape(-1, idx.shape[-1]),
            self.W_dec,
            per_sample_weights=acts.reshape(-1, acts.shape[-1]).to(self.W_dec.dtype),
            mode="sum",
        )
        out = (out + self.b_dec).reshape(*shape, self.d_out)
        return out / self.input_scale if self.input_scale != 1.0 else out

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        f = self.encode(x)
        x_hat = self.decode(f)
        if self.W_skip is not None:
            x_hat = x_hat + x.to(self.W_skip.dtype) @ self.W_skip
        return x_hat, f

    # ------------------------------------------------------------------ geometry helpers
    def encoder_directions(self) -> torch.Tensor:
        """Encoder rows, one per latent: ``[n, d_in]`` (what the matching compares)."""
        return self.W_enc_T.detach()

    def decoder_directions(self) -> torch.Tensor:
        """Decoder rows, one per latent: ``[n, d_out]``."""
        return self.W_dec.detach()

    @torch.no_grad()
    def normalize_decoder_(self) -> SparseDictionary:
        """Rescale decoder rows to unit norm (in place)."""
        eps = torch.finfo(self.W_dec.dtype).eps
        self.W_dec.div_(self.W_dec.norm(dim=1, keepdim=True) + eps)
        return self

    def extra_repr(self) -> str:
        k = f", k={self.k}" if self.k is not None else ""
        s = ", skip" if self.W_skip is not None else ""
        return f"d_in={self.d_in}, n_latents={self.n_latents}, d_out={self.d_out}, activation={self.activation}{k}{s}"


# ---------------------------------------------------------------------- loaders
def load_sparsify(folder: str | Path) -> SparseDictionary:
    """Load one sparsify hookpoint folder (``cfg.json`` + ``sae.safetensors``).

    sparsify stores ``encoder.weight [n, d_in]``, ``encoder.bias [n]``, ``W_dec [n, d_in]``,
    ``b_dec [d_in]``; encode = top-k of ReLU((x − b_dec) Wᵀ + b), the subtraction skipped for
    transcoders; decode = Σ acts · W_dec[idx] + b_dec. ``W_skip`` (skip transcoders) and the
    ``groupmax`` activation are not supported and raise.
    """
    folder = Path(folder)
    cfg = json.loads((folder / "cfg.json").read_text()) if (folder / "cfg.json").exists() else None
    if cfg is None or not (folder / WEIGHTS_FILE).exists():
        raise UserError(f"{folder} is not a sparsify folder: expected cfg.json and {WEIGHTS_FILE}")
    if cfg.get("activation", "topk") != "topk":
        raise UserError(f"sparsify activation {cfg.get('activation')!r} is not supported; only 'topk'")
    t = load_tensors(folder / WEIGHTS_FILE)
    if "W_skip" in t or cfg.get("skip_connection"):
        raise UserError("sparsify skip-connection transcoders (W_skip) are not supported")
    if "W_dec" not in t:
        raise UserError(f"{folder}/{WEIGHTS_FILE} has no W_dec (saved without a decoder?)")
    enc_w = t["encoder.weight"]  # [n, d_in]
    n, d_in = enc_w.shape
    transcode = bool(cfg.get("transcode", False))
    sae = SparseDictionary(
        d_in,
        n,
        d_out=t["W_dec"].shape[1],
        activation="topk",
        k=int(cfg["k"]),
        apply_b_dec_to_input=not transcode,
        dtype=torch.float32,
    )
    return sae.load_tensors_(
        {"W_enc": enc_w.T, "b_enc": t["encoder.bias"], "W_dec": t["W_dec"], "b_dec": t["b_dec"]}
    )


def load_saelens(folder: str | Path) -> SparseDictionary:
    """Load a SAELens folder (``cfg.json`` + ``sae_weights.safetensors``).

    Architectures: ``standard`` (ReLU), ``topk`` (top-k of pre then ReLU: the same values as
    ReLU then top-k), ``jumprelu`` (ReLU(pre)·[pre > θ]). ``apply_b_dec_to_input`` is honoured;
    activation normalisation other than ``none`` raises, because it needs a dataset statistic.
    """
    folder = Path(folder)
    cfg_path = folder / "cfg.json"
    if not cfg_path.exists():
        raise UserError(f"{folder} is not a SAELens folder: no cfg.json")
    cfg = json.loads(cfg_path.read_text())
    arch = cfg.get("architecture")
    if arch is None:  # older releases: architecture implied by activation_fn
        arch = "topk" if cfg.get("activation_fn", cfg.get("activation_fn_str")) == "topk" else "standard"
    norm = cfg.get("normalize_activations", "none") or "none"
    if norm != "none":
        raise UserError(f"SAELens normalize_activations={norm!r} is not supported; only 'none'")
    t = load_tensors(folder / "sae_weights.safetensors")
    d_in, n = t["W_enc"].shape
    mapping = {"standard": "relu", "topk": "topk", "jumprelu": "jumprelu"}
    if arch not in mapping:
        raise UserError(f"SAELens architecture {arch!r} is not supported; allowed: {', '.join(mapping)}")
    k = cfg.get("k") or (cfg.get("activation_fn_kwargs") or {}).get("k")
    sae = SparseDictionary(
        d_in,
        n,
        d_out=t["W_dec"].shape[1],
        activation=mapping[arch],
        k=k,
        apply_b_dec_to_input=bool(cfg.get("apply_b_dec_to_input", True)),
        input_site=cfg.get("hook_name"),
        output_site=cfg.get("hook_name"),
    )
    want = {name: t[name] for name in ("W_enc", "b_enc", "W_dec", "b_dec")}
    if arch == "jumprelu":
        want["threshold"] = t["threshold"] if "threshold" in t else torch.exp(t["log_threshold"])
    return sae.load_tensors_(want)


@torch.no_grad()
def sae_stats(sae: SparseDictionary, X: torch.Tensor, batch: int = 4096) -> dict[str, Any]:
    """FVU, mean L0, dead fraction and per-latent firing frequency ``[n]`` of ``sae`` on ``X [N, d]``."""
    n = sae.n_latents
    fires = torch.zeros(n, dtype=torch.float64)
    sq_err = 0.0
    l0 = 0.0
    Xf = X.float()
    mean = Xf.mean(0)
    total = float((Xf - mean).pow(2).sum())
    for i in range(0, X.shape[0], batch):
        xb = Xf[i : i + batch]
        x_hat, f = sae(xb)
        sq_err += float((xb - x_hat).pow(2).sum())
        active = f > 0
        fires += active.sum(0).double()
        l0 += float(active.sum())
    N = X.shape[0]
    freq = (fires / N).float()
    return {
        "fvu": sq_err / total,
        "l0": l0 / N,
        "dead_frac": float((freq == 0).float().mean()),
        "firing_freq": freq,
    }


# ---------------------------------------------------------------------- more loaders
def _array_dict(path: Path) -> dict[str, torch.Tensor]:
    import numpy as np

    with np.load(path, allow_pickle=False) as z:  # .npz of plain arrays; object arrays (pickles) are refused
        return {k: torch.from_numpy(np.asarray(z[k], dtype=np.float32)) for k in z.files}


def load_gemmascope(path: str | Path, site: str | None = None, output_site: str | None = None) -> SparseDictionary:
    """Load a GemmaScope ``params.npz`` (``W_enc [d, n]``, ``b_enc``, ``W_dec [n, d_out]``, ``b_dec``,
    ``threshold``): JumpReLU, pre = x·W_enc + b_enc, f = pre·[pre > θ], on raw (un-normalised) activations and
    without subtracting b_dec. GemmaScope transcoders load the same way with ``output_site`` set.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "params.npz"
    if not path.exists():
        raise UserError(f"GemmaScope weights not found: {path} (expected a params.npz)")
    t = _array_dict(path)
    need = ("W_enc", "b_enc", "W_dec", "b_dec", "threshold")
    if missing := [k for k in need if k not in t]:
        raise UserError(f"{path} lacks {missing}; a GemmaScope params.npz has {', '.join(need)}")
    _jumprelu_threshold(path, t["threshold"])
    d_in, n = t["W_enc"].shape
    sae = SparseDictionary(d_in, n, d_out=t["W_dec"].shape[1], activation="jumprelu", apply_b_dec_to_input=False,
                           input_site=site, output_site=output_site or site)
    return sae.load_tensors_({k: t[k] for k in need})


DICTIONARY_LEARNING_CLASSES = ("AutoEncoder", "AutoEncoderTopK", "BatchTopKSAE", "JumpReluAutoEncoder")


def load_dictionary_learning(folder: str | Path, site: str | None = None) -> SparseDictionary:
    """Load a ``dictionary_learning`` folder (``ae.pt`` + ``config.json``): ``AutoEncoder`` (ReLU, b_dec = ``bias``
    subtracted from the input), ``AutoEncoderTopK``, ``BatchTopKSAE`` (inference with its learned threshold:
    f = ReLU(pre)·[ReLU(pre) > θ], as the library does by default) and ``JumpReluAutoEncoder``.

    The library publishes only ``torch.save`` files; they are read with ``torch.load(weights_only=True)``, the
    restricted unpickler that rebuilds tensors and refuses code. ``ae.safetensors`` is preferred when present.
    """
    folder = Path(folder)
    st, pt = folder / "ae.safetensors", folder / "ae.pt"
    if st.exists():
        t = load_tensors(st)
    elif pt.exists():
        try:
            t = torch.load(pt, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - any refusal of the restricted loader is a format error here
            raise UserError(f"{pt} is not a plain tensor state dict ({type(e).__name__}); refusing to unpickle it") from e
    else:
        raise UserError(f"{folder} is not a dictionary_learning folder: expected ae.pt (or ae.safetensors)")
    cfg_path = folder / "config.json"
    trainer = json.loads(cfg_path.read_text()).get("trainer", {}) if cfg_path.exists() else {}
    cls = trainer.get("dict_class")
    if cls is None:  # infer from the keys
        cls = ("JumpReluAutoEncoder" if "W_enc" in t else "AutoEncoder" if "bias" in t
               else "AutoEncoderTopK" if "k" in t else None)
    if cls not in DICTIONARY_LEARNING_CLASSES:
        raise UserError(f"dictionary_learning class {cls!r} is not supported; allowed: "
                        f"{', '.join(DICTIONARY_LEARNING_CLASSES)}")
    t = {k: v.float() if v.is_floating_point() else v for k, v in t.items()}
    if cls == "JumpReluAutoEncoder":
        d_in, n = t["W_enc"].shape
        sae = SparseDictionary(d_in, n, activation="jumprelu",
                               apply_b_dec_to_input=bool(trainer.get("apply_b_dec_to_input", False)),
                               input_site=site, output_site=site)
        return sae.load_tensors_({k: t[k] for k in ("W_enc", "b_enc", "W_dec", "b_dec", "threshold")})
    n, d_in = t["encoder.weight"].shape
    b_dec = t["bias"] if cls == "AutoEncoder" else t["b_dec"]
    w = {"W_enc": t["encoder.weight"].T, "b_enc": t["encoder.bias"], "W_dec": t["decoder.weight"].T, "b_dec": b_dec}
    if cls == "AutoEncoder":
        sae = SparseDictionary(d_in, n, activation="relu", input_site=site, output_site=site)
    elif cls == "AutoEncoderTopK":
        sae = SparseDictionary(d_in, n, activation="topk", k=int(t["k"]), input_site=site, output_site=site)
    else:
        theta = float(t["threshold"])
        if theta < 0:
            raise UserError(f"{folder}: BatchTopKSAE without a learned threshold ({theta}) has no per-example "
                            "inference rule; only thresholded BatchTopK is supported")
        sae = SparseDictionary(d_in, n, activation="jumprelu", input_site=site, output_site=site)
        w["threshold"] = torch.full((n,), theta)
    return sae.load_tensors_(w)


def _jumprelu_threshold(path, theta: torch.Tensor) -> torch.Tensor:
    # the official forms are x·[x > θ] (circuit-tracer) and ReLU(x)·[x > θ] (Gemma Scope, here): equal iff θ >= 0
    if bool((theta < 0).any()):
        raise UserError(f"{path}: negative JumpReLU thresholds are not supported (f = ReLU(pre)·[pre > θ] here, "
                        "which differs from x·[x > θ] below zero)")
    return theta


def load_circuit_tracer_transcoder(path: str | Path, input_site: str | None = None,
                                   output_site: str | None = None, *, layout: str = "auto") -> SparseDictionary:
    """Load a circuit-tracer single-layer transcoder file (one ``layer_{i}.safetensors``).

    The layout is circuit-tracer's ``SingleLayerTranscoder.to_safetensors`` (release 0.5.0): ``W_enc [n, d_in]``
    (pre = F.linear(x, W_enc, b_enc)), ``W_dec [n, d_out]`` (y = f @ W_dec + b_dec), ``b_enc [n]``, ``b_dec
    [d_out]``, optional ``activation_function.threshold [n]`` (JumpReLU; ReLU without it) and optional ``W_skip
    [d_out, d_in]`` added as ``x @ W_skip.T``. The files of the first release (safety-research/circuit-tracer
    @ 33777f6, whose loader transposed both matrices) store ``W_dec [d_out, n]``; ``layout="auto"`` tells the two
    apart from ``b_enc``/``b_dec`` and asks for ``layout="rows"`` (0.5.0) or ``"columns"`` (first release)
    when ``n == d_out`` leaves it ambiguous. GemmaScope transcoders go through :func:`load_gemmascope` /
    :func:`load_gemmascope2`.
    """
    if layout not in ("auto", "rows", "columns"):
        raise UserError(f"layout={layout!r}; allowed: auto, rows (circuit-tracer >= 0.5: W_dec [n, d]), "
                        "columns (first release: W_dec [d, n])")
    t = load_tensors(path)
    need = ("W_enc", "W_dec", "b_enc", "b_dec")
    if missing := [k for k in need if k not in t]:
        raise UserError(f"{path} lacks {missing}; a circuit-tracer transcoder has {', '.join(need)}")
    if "log_thresholds" in t:
        raise UserError(f"{path} stores log_thresholds, which circuit-tracer's loader refuses too")
    n, d_out = t["b_enc"].shape[0], t["b_dec"].shape[0]
    if t["W_enc"].dim() != 2 or t["W_enc"].shape[0] != n:
        raise UserError(f"{path}: W_enc has shape {tuple(t['W_enc'].shape)}, expected [n={n}, d_in]")
    d_in = t["W_enc"].shape[1]
    W_dec = t["W_dec"]
    if layout == "auto":
        if n == d_out:
            raise UserError(f"{path}: n_latents == d_out == {n}, so W_dec's layout is ambiguous; pass "
                            "layout='rows' (circuit-tracer >= 0.5) or layout='columns' (first release)")
        layout = "rows" if tuple(W_dec.shape) == (n, d_out) else "columns"
    W_dec = W_dec if layout == "rows" else W_dec.T
    if tuple(W_dec.shape) != (n, d_out):
        raise UserError(f"{path}: W_dec has shape {tuple(t['W_dec'].shape)}; with n={n}, d_out={d_out} it must be "
                        f"[{n}, {d_out}] (circuit-tracer >= 0.5) or [{d_out}, {n}] (first release)")
    theta = t.get("activation_function.threshold", t.get("threshold"))
    skip = t.get("W_skip")
    if skip is not None and tuple(skip.shape) != (d_out, d_in):
        raise UserError(f"{path}: W_skip has shape {tuple(skip.shape)}, expected [d_out={d_out}, d_in={d_in}]")
    skip = skip if skip is not None and bool(skip.abs().max() > 0) else None
    sae = SparseDictionary(d_in, n, d_out=d_out, activation="relu" if theta is None else "jumprelu",
                           apply_b_dec_to_input=False, input_site=input_site, output_site=output_site,
                           skip=skip is not None)
    w = {"W_enc": t["W_enc"].T.float(), "b_enc": t["b_enc"].float(), "W_dec": W_dec.float(),
         "b_dec": t["b_dec"].float()}
    if theta is not None:
        w["threshold"] = _jumprelu_threshold(path, theta.reshape(-1).float())
    if skip is not None:
        w["W_skip"] = skip.T.float()
    return sae.load_tensors_(w)


def load_gemmascope2(path: str | Path, site: str | None = None, output_site: str | None = None) -> SparseDictionary:
    """Load a Gemma Scope 2 SAE or transcoder (Gemma 3 models): a folder with ``params.safetensors`` (and
    ``config.json``), or the file itself.

    Keys (the layout SAELens' ``gemma_3_sae_huggingface_loader`` and circuit-tracer 0.5.0's
    ``load_gemma_scope_2_transcoder`` read): ``w_enc [d_in, n]``, ``w_dec [n, d_out]``, ``b_enc [n]``, ``b_dec
    [d_out]``, ``threshold [n]`` and, for skip transcoders, ``affine_skip_connection [d_in, d_out]``.
    Forward: pre = x·w_enc + b_enc, f = ReLU(pre)·[pre > θ], y = f·w_dec + b_dec (+ x·affine_skip_connection), on
    raw activations. ``config.json``'s ``hf_hook_point_in`` / ``hf_hook_point_out`` are kept as
    ``hf_hook_in`` / ``hf_hook_out`` attributes; name the matching iclr26 sites with ``site`` / ``output_site``.
    """
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    if path.is_dir():
        path = path / "params.safetensors"
    if not path.exists():
        raise UserError(f"Gemma Scope 2 weights not found: {path} (expected params.safetensors)")
    t = load_tensors(path)
    need = ("w_enc", "w_dec", "b_enc", "b_dec", "threshold")
    if missing := [k for k in need if k not in t]:
        raise UserError(f"{path} lacks {missing}; a Gemma Scope 2 params.safetensors has {', '.join(need)}"
                        + (" (a .npz GemmaScope 1 file goes through load_gemmascope)" if "W_enc" in t else ""))
    d_in, n = t["w_enc"].shape
    d_out = t["w_dec"].shape[-1]
    if t["w_dec"].dim() != 2:
        raise UserError(f"{path}: w_dec has shape {tuple(t['w_dec'].shape)}; cross-layer transcoders (CLT) are not "
                        "supported, only per-layer SAEs and transcoders")
    skip = t.get("affine_skip_connection")
    sae = SparseDictionary(d_in, n, d_out=d_out, activation="jumprelu", apply_b_dec_to_input=False,
                           input_site=site, output_site=output_site or site, skip=skip is not None)
    w = {"W_enc": t["w_enc"].float(), "b_enc": t["b_enc"].float(), "W_dec": t["w_dec"].float(),
         "b_dec": t["b_dec"].float(), "threshold": _jumprelu_threshold(path, t["threshold"].float())}
    if skip is not None:
        w["W_skip"] = skip.float()
    sae.load_tensors_(w)
    cfg = folder / "config.json"
    meta = json.loads(cfg.read_text()) if cfg.is_file() else {}
    sae.hf_hook_in, sae.hf_hook_out = meta.get("hf_hook_point_in"), meta.get("hf_hook_point_out")
    return sae
