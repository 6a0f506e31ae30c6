"""Culture-neuron unit scoring (P5) side by side with a captum ``LayerGradientXActivation`` loop doing the same.

The task: score every MLP gate channel and every q / k / v channel of Gemma 3 270M (18 layers, 64,512 units) on
100 country-knowledge MCQs (``iclr26.data.culture.country_mcqs``), s(n) = p · max_t a_t(n) · ∂p/∂a_t(n) with p the
probability of the gold letter at the last prompt token, pads excluded from the max.

- ``iclr26``: :func:`iclr26.interp.unit_scores.unit_scores` (one backward per batch through zero leaves on the
  projection outputs, reduced to ``[batch, units]`` inside the loop, LM head only at the read position).
- ``captum``: per batch, ``LayerGradientXActivation(forward, [every gate/q/k/v projection])`` returns
  ``[batch, tokens, channels]`` per module; the same mask, max and ×p are applied afterwards.

Each method runs in its own fresh subprocess: wall time and the rise of the process's max RSS during the call.
The two score matrices are compared (max abs difference). Run: ``.venv/bin/python bench/unit_scores_gemma.py
[--items 100] [--batch 10] [--threads 1] [--tiny]`` (``--tiny``: a random tiny Llama, for machines without the
Gemma package). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import torch


def _setup(tiny: bool, items: int, batch: int):
    from iclr26.data.culture import LETTERS, country_mcqs

    if tiny:
        from iclr26.lm import tiny_lm

        model = tiny_lm("llama", d=64, layers=4, heads=4, kv_heads=2, ff=256, vocab=300, seed=0)
        g = torch.Generator().manual_seed(0)
        rows = [torch.randint(4, 300, (int(torch.randint(20, 40, (1,), generator=g)),), generator=g).tolist()
                for _ in range(items)]
        gold = torch.randint(4, 300, (items,), generator=g)
    else:
        from iclr26.lm import load_model

        model, tok = load_model("gemma-3-270m")
        qs = country_mcqs()[:items]
        rows = [tok(q.prompt)["input_ids"] for q in qs]
        ids = {L: tok(" " + L, add_special_tokens=False)["input_ids"][0] for L in LETTERS}
        gold = torch.tensor([ids[q.gold] for q in qs])
    batches = []
    for s in range(0, len(rows), batch):
        chunk = rows[s:s + batch]
        T = max(map(len, chunk))
        x = torch.zeros((len(chunk), T), dtype=torch.long)
        am = torch.zeros((len(chunk), T), dtype=torch.long)
        for i, r in enumerate(chunk):
            x[i, : len(r)] = torch.tensor(r)
            am[i, : len(r)] = 1
        batches.append({"input_ids": x, "attention_mask": am})
    return model.eval(), batches, gold


def _modules(model):
    """The projection modules behind the sites, in unit_sites order (gate, q, k, v per layer)."""
    out = []
    for blk in model.model.layers:
        out += [blk.mlp.gate_proj, blk.self_attn.q_proj, blk.self_attn.k_proj, blk.self_attn.v_proj]
    return out


def _child(method: str, tiny: bool, items: int, batch: int, threads: int) -> dict:
    torch.set_num_threads(threads)
    model, batches, gold = _setup(tiny, items, batch)
    with torch.no_grad():
        model(**batches[0])  # warm-up: its memory is the baseline
    from iclr26.interp.unit_scores import unit_scores, unit_sites

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    if method == "iclr26":
        S, _ = unit_scores(model, batches, gold, unit_sites(model))
    else:
        from captum.attr import LayerGradientXActivation

        mods = _modules(model)
        for p in model.parameters():
            p.requires_grad_(False)
        out, row0 = [], 0
        for b in batches:
            am = b["attention_mask"]
            last = am.sum(1) - 1
            tg = gold[row0: row0 + am.shape[0]]

            def fwd(x, am=am, last=last, tg=tg):
                logits = model(input_ids=x, attention_mask=am).logits
                p = torch.softmax(logits[torch.arange(x.shape[0]), last].float(), -1)
                return p.gather(1, tg[:, None]).squeeze(1)

            with torch.no_grad():
                p = fwd(b["input_ids"])
            att = LayerGradientXActivation(fwd, mods).attribute(b["input_ids"])
            pad = ~am.bool()
            cols = [a.detach().float().masked_fill(pad[..., None], float("-inf")).amax(1) for a in att]
            out.append(torch.cat(cols, 1) * p[:, None])
            row0 += am.shape[0]
        S = torch.cat(out)
    secs = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    torch.save(S, os.environ["ICLR26_BENCH_OUT"])  # plain tensor, read back by the parent only
    return {"seconds": secs, "peak_rise_mb": (peak - base) / 1024, "units": int(S.shape[1])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=100)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child(args.child, args.tiny, args.items, args.batch, args.threads)))
        return
    res, outs = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for method in ("iclr26", "captum"):
            path = os.path.join(tmp, f"{method}.pt")
            cmd = [sys.executable, __file__, "--child", method, "--items", str(args.items), "--batch",
                   str(args.batch), "--threads", str(args.threads)] + (["--tiny"] if args.tiny else [])
            p = subprocess.run(cmd, env={**os.environ, "ICLR26_BENCH_OUT": path}, capture_output=True, text=True)
            if p.returncode:
                raise RuntimeError(p.stderr[-2000:])
            res[method] = json.loads(p.stdout.strip().splitlines()[-1])
            outs[method] = torch.load(path, weights_only=True)
    diff = float((outs["iclr26"] - outs["captum"]).abs().max())
    scale = float(outs["captum"].abs().max())
    load = os.getloadavg()[0]
    name = "tiny llama" if args.tiny else "Gemma 3 270M"
    print(f"{name}, {res['iclr26']['units']} units, {args.items} MCQs in batches of {args.batch}, threads "
          f"{args.threads}, load average at the end {load:.2f}\n")
    print("| method | seconds | peak RSS rise (MB) | notes |\n|---|---:|---:|---|")
    for m in ("iclr26", "captum"):
        note = ""
        if m == "iclr26":
            note = (f"{res['captum']['seconds'] / res['iclr26']['seconds']:.2f}× captum's speed; max |diff| "
                    f"{diff:.2e} (max |score| {scale:.2e})")
        print(f"| {m} | {res[m]['seconds']:.2f} | {res[m]['peak_rise_mb']:.0f} | {note} |")


if __name__ == "__main__":
    main()
