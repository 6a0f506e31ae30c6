"""Probes, steering and attribution (interp core, part two) side by side with the anchor libraries.

Three measurements, one run:

1. ``LinearProbe.fit`` on 20,000 × 640 activations (the width of Gemma 3 270M's residual stream) with a planted
   direction, against the bare scikit-learn ``LogisticRegression`` it wraps (the cost of standardisation and the
   wrapper), and ``DiffMeansProbe.fit``.
2. Steering overhead in greedy ``generate`` on Gemma 3 270M (KV cache on): plain generation, iclr26 ``steer`` at
   every position of ``layers.{L}.resid_post``, and ``steering_vectors.SteeringVector.apply`` with the same vector,
   layer and multiplier; the steered token sequences of the two libraries must be identical.
3. ``act_x_grad`` against captum's ``LayerGradientXActivation`` (same model, sites = every layer's MLP output, metric =
   gold-token probability at the last position): max abs difference, time and peak memory. Peak memory is the rise
   of the process's max RSS during the call, each method in its own fresh subprocess.

Run: ``.venv/bin/python bench/interp_part2.py [--threads 1] [--tiny]`` (``--tiny``: a random tiny Llama instead of
Gemma 3 270M, for machines without the package). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import numpy as np
import torch


def _model(tiny: bool):
    if tiny:
        from iclr26.lm import WordTokenizer, tiny_lm

        tok = WordTokenizer([f"w{i}" for i in range(500)])
        return tiny_lm("llama", d=128, layers=6, heads=4, vocab=len(tok), ctx=256, seed=0), tok
    from iclr26.lm import load_model

    return load_model("gemma-3-270m")


def _prompts(tok, n: int, seq: int, tiny: bool):
    g = torch.Generator().manual_seed(0)
    lo = 4
    hi = min(len(tok), 20000 if not tiny else len(tok))
    return torch.randint(lo, hi, (n, seq), generator=g)


# ---------------------------------------------------------------------------------------------------- 1. probes
def bench_probes(repeats: int) -> list[tuple[str, float, str]]:
    from sklearn.linear_model import LogisticRegression

    from iclr26.interp.probes import DiffMeansProbe, LinearProbe, auroc

    rng = np.random.default_rng(0)
    n, d = 20_000, 640
    w = rng.standard_normal(d)
    w /= np.linalg.norm(w)
    X = rng.standard_normal((n, d)).astype(np.float32) * rng.uniform(0.2, 3.0, d).astype(np.float32)
    y = (X @ w + 0.5 * rng.standard_normal(n) > 0).astype(int)
    rows = []
    for name, make in [
        ("LinearProbe.fit (standardise + LR, λ=10)", lambda: LinearProbe()),
        ("DiffMeansProbe.fit", lambda: DiffMeansProbe()),
    ]:
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            p = make().fit(X, y)
            ts.append(time.perf_counter() - t0)
        r = np.ravel(p.direction(units="raw"))
        cos = float(abs(r @ w) / np.linalg.norm(r))
        rows.append((name, statistics.median(ts), f"AUROC {auroc(p.decision_function(X), y):.3f}, |cos(w, planted)| {cos:.3f}"))
    Z = (X - X.mean(0)) / X.std(0)
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        LogisticRegression(C=0.1, fit_intercept=False, solver="lbfgs", max_iter=1000).fit(Z, y)
        ts.append(time.perf_counter() - t0)
    rows.append(("sklearn LogisticRegression on pre-standardised X (lbfgs)", statistics.median(ts), "anchor"))
    return rows


# ---------------------------------------------------------------------------------------------------- 2. steering
def bench_steering(tiny: bool, repeats: int, new_tokens: int) -> list[tuple[str, float, str]]:
    import steering_vectors as sv

    from iclr26.interp.interventions import steer

    model, tok = _model(tiny)
    L = model.config.num_hidden_layers // 2
    d = model.config.hidden_size
    ids = _prompts(tok, 1, 16, tiny)
    v = torch.randn(d, generator=torch.Generator().manual_seed(1))
    # scale: a fifth of the typical residual norm at that layer, enough to change the continuation
    with torch.no_grad():
        h = model(input_ids=ids, output_hidden_states=True).hidden_states[L + 1]
    v = v / v.norm() * 0.2 * float(h.norm(dim=-1).mean())
    vec = sv.SteeringVector(layer_activations={L: v}, layer_type="decoder_block")
    gen = dict(max_new_tokens=new_tokens, do_sample=False, min_new_tokens=new_tokens,
               pad_token_id=tok.pad_token_id or 0)  # fmt: skip

    def plain():
        return model.generate(ids, **gen)

    def ours():
        with steer(model, f"layers.{L}.resid_post", v, alpha=1.0):
            return model.generate(ids, **gen)

    def theirs():
        with vec.apply(model, multiplier=1.0, min_token_index=0):
            return model.generate(ids, **gen)

    outs = {}
    times: dict[str, list[float]] = {"plain": [], "iclr26 steer": [], "steering-vectors apply": []}
    fns = {"plain": plain, "iclr26 steer": ours, "steering-vectors apply": theirs}
    with torch.no_grad():
        for f in fns.values():
            f()  # warm-up
        for _ in range(repeats):  # round robin so load drift biases nobody
            for k, f in fns.items():
                t0 = time.perf_counter()
                outs[k] = f()
                times[k].append(time.perf_counter() - t0)
    same = torch.equal(outs["iclr26 steer"], outs["steering-vectors apply"])
    changed = not torch.equal(outs["iclr26 steer"], outs["plain"])
    base = statistics.median(times["plain"])
    rows = []
    for k, ts in times.items():
        med = statistics.median(ts)
        note = "" if k == "plain" else f"overhead {100 * (med / base - 1):+.1f} %"
        if k == "steering-vectors apply":
            note += f"; same tokens as iclr26: {same}; steered ≠ plain: {changed}"
        rows.append((f"greedy generate {new_tokens} tokens, {k}", med, note))
    return rows


# ---------------------------------------------------------------------------------------------------- 3. attribution
def _attr_child(method: str, tiny: bool, batch: int, seq: int, threads: int) -> dict:
    torch.set_num_threads(threads)
    model, tok = _model(tiny)
    ids = _prompts(tok, batch, seq, tiny)
    am = torch.ones_like(ids)
    targets = torch.arange(batch) + 5
    n_layers = model.config.num_hidden_layers
    sites = [f"layers.{i}.mlp.out" for i in range(n_layers)]
    with torch.no_grad():
        model(input_ids=ids, attention_mask=am)  # warm-up: its memory is the baseline
    from captum.attr import LayerGradientXActivation

    from iclr26.interp.attribution import act_x_grad, gold_prob

    keep = {"logits_to_keep": 1} if method == "captum-keep1" else {}

    def fwd(x):
        p = torch.softmax(model(input_ids=x, attention_mask=am, **keep).logits[:, -1].float(), -1)
        return p.gather(1, targets[:, None]).squeeze(1)

    model.eval()
    # the module whose output is iclr26's ``mlp.out`` (Gemma: after post_feedforward_layernorm)
    layers = [getattr(blk, "post_feedforward_layernorm", blk.mlp) for blk in model.model.layers]
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    if method == "iclr26":
        res = act_x_grad(model, {"input_ids": ids, "attention_mask": am}, sites, gold_prob(targets), reduce_pos="none")
        out = torch.stack([res[s].view(batch, seq, -1) for s in sites])
    else:
        att = LayerGradientXActivation(fwd, layers).attribute(ids)
        out = torch.stack([a.detach().float() for a in att])
    secs = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # time: median of the first call and 2 more (memory: the first call's peak)
    ts = [secs]
    for _ in range(2):
        t0 = time.perf_counter()
        if method == "iclr26":
            act_x_grad(model, {"input_ids": ids, "attention_mask": am}, sites, gold_prob(targets), reduce_pos="none")
        else:
            LayerGradientXActivation(fwd, layers).attribute(ids)
        ts.append(time.perf_counter() - t0)
    secs = statistics.median(ts)
    path = os.environ["ICLR26_BENCH_OUT"]
    torch.save(out, path)  # plain tensor, read back by the parent only (local scratch file)
    return {"seconds": secs, "peak_rise_mb": (peak - base) / 1024}


def bench_attr(tiny: bool, batch: int, seq: int, threads: int) -> list[tuple[str, float, str]]:
    import tempfile

    res, outs = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for method in ("iclr26", "captum", "captum-keep1"):
            path = os.path.join(tmp, f"{method}.pt")
            cmd = [sys.executable, __file__, "--attr-child", method, "--batch", str(batch), "--seq", str(seq),
                   "--threads", str(threads)] + (["--tiny"] if tiny else [])  # fmt: skip
            p = subprocess.run(cmd, env={**os.environ, "ICLR26_BENCH_OUT": path}, capture_output=True, text=True)
            if p.returncode:
                raise RuntimeError(p.stderr[-2000:])
            res[method] = json.loads(p.stdout.strip().splitlines()[-1])
            outs[method] = torch.load(path, weights_only=True)
    diff = float((outs["iclr26"] - outs["captum"]).abs().max())
    scale = float(outs["captum"].abs().max())
    rows = []
    for m in ("iclr26", "captum", "captum-keep1"):
        note = f"peak RSS rise {res[m]['peak_rise_mb']:.0f} MB"
        if m == "captum-keep1":
            note += " (captum with the head computed at the last position only, by hand: where the gain comes from)"
        if m == "iclr26":
            note += (f"; {res['captum']['seconds'] / res['iclr26']['seconds']:.2f}× captum's speed, "
                     f"{res['iclr26']['peak_rise_mb'] / max(res['captum']['peak_rise_mb'], 1e-9):.2f}× its memory; "
                     f"max |diff| {diff:.2e} (max |score| {scale:.2e})")  # fmt: skip
        rows.append((f"act × grad, all MLP outputs, batch {batch}×{seq}, {m}", res[m]["seconds"], note))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--only", choices=["probes", "steering", "attr"], default=None)
    ap.add_argument("--attr-child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.attr_child:
        print(json.dumps(_attr_child(args.attr_child, args.tiny, args.batch, args.seq, args.threads)))
        return
    rows = []
    if args.only in (None, "probes"):
        rows += bench_probes(args.repeats)
    if args.only in (None, "steering"):
        rows += bench_steering(args.tiny, args.repeats, args.new_tokens)
    if args.only in (None, "attr"):
        rows += bench_attr(args.tiny, args.batch, args.seq, args.threads)
    load = os.getloadavg()[0]
    print(f"threads {args.threads}, load average at the end {load:.2f}, model {'tiny llama' if args.tiny else 'Gemma 3 270M'}\n")
    print("| measurement | seconds (median) | notes |\n|---|---:|---|")
    for name, secs, note in rows:
        print(f"| {name} | {secs:.3f} | {note} |")


if __name__ == "__main__":
    main()
