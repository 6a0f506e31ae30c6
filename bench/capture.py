"""Capture overhead on Gemma 3 270M: iclr26 ``capture`` vs a bare forward and vs nnsight.

Task: the residual stream after layer 6 (``layers.6.resid_post`` = ``hidden_states[7]``) for one batch of
English text. Methods, all under ``torch.no_grad`` on the same batch (no KV cache):

- full forward with ``output_hidden_states=True`` (what "cache everything" costs; includes the 262k-vocab head)
- full forward, no hidden states (the plain model call)
- bare forward truncated by hand: the base model with only layers 0-6 (the lower bound for any hook tool)
- iclr26 ``capture(model, batch, "layers.6.resid_post")`` (early stop after layer 6)
- iclr26 ``capture(..., stop_after=False)`` (hooks, but the whole model and the head run)
- nnsight ``LanguageModel.trace`` saving ``model.layers[6].output``, with and without ``tracer.stop()``

Run: ``.venv/bin/python bench/capture.py [--batch 4 --seq 64 --repeats 5 --threads 1]``; prints a markdown
table. Timing is round-robin (see ``main``) so that a shared, loaded machine biases no method.
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import statistics
import time

import torch
from torch import nn

from iclr26.interp.capture import capture
from iclr26.lm import load_model

SITE, LAYER = "layers.6.resid_post", 6


def texts(n: int) -> list[str]:
    try:
        from iclr26.data.text import load_austen

        return [t for t in load_austen(max_words=20_000) if len(t.split()) > 120][:n]
    except Exception:  # Austen not installed: repeat a fixed English paragraph
        base = (
            "It is a truth universally acknowledged, that a single man in possession of a good fortune, "
            "must be in want of a wife. "
        ) * 12
        return [base] * n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch default)")
    ap.add_argument("--no-nnsight", action="store_true")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    t0 = time.perf_counter()
    model, tok = load_model("gemma-3-270m")
    load_s = time.perf_counter() - t0
    enc = tok(texts(args.batch), return_tensors="pt", truncation=True, max_length=args.seq, padding=True)
    assert enc["attention_mask"].all(), "texts are long enough that no padding is needed"
    ids, am = enc["input_ids"], enc["attention_mask"]
    B, T = ids.shape

    # the hand-truncated model: same modules, only layers 0..6, no final norm, no head
    trunk = copy.copy(model.model)
    trunk._modules = dict(trunk._modules)
    trunk._modules["layers"] = nn.ModuleList(list(model.model.layers)[: LAYER + 1])
    trunk._modules["norm"] = nn.Identity()

    methods: list[tuple[str, object]] = [
        (
            "full forward, output_hidden_states=True",
            lambda: model(
                input_ids=ids, attention_mask=am, output_hidden_states=True, use_cache=False
            ).hidden_states[LAYER + 1],
        ),
        ("full forward (plain)", lambda: (model(input_ids=ids, attention_mask=am, use_cache=False), None)[1]),
        (
            "bare forward truncated by hand at layer 6",
            lambda: trunk(input_ids=ids, attention_mask=am, use_cache=False).last_hidden_state,
        ),
        ("iclr26 capture (stop after layer 6)", lambda: capture(model, enc, SITE)[SITE].view(B, T, -1)),
        (
            "iclr26 capture, stop_after=False",
            lambda: capture(model, enc, SITE, stop_after=False)[SITE].view(B, T, -1),
        ),
    ]
    nn_version = None
    if not args.no_nnsight:
        try:
            import nnsight
            from nnsight import LanguageModel

            nn_version = nnsight.__version__
            lm = LanguageModel(model, tokenizer=tok)

            def nn_trace(stop: bool):
                with lm.trace({"input_ids": ids, "attention_mask": am}, use_cache=False) as tracer:
                    h = lm.model.layers[LAYER].output.save()
                    if stop:
                        tracer.stop()
                return h[0] if isinstance(h, tuple) else h

            methods.append((f"nnsight {nn_version} trace + .save()", lambda: nn_trace(False)))
            methods.append((f"nnsight {nn_version} trace + .save() + tracer.stop()", lambda: nn_trace(True)))
        except Exception as e:  # report, do not hide
            print(f"  nnsight unavailable: {type(e).__name__}: {e}")
            nn_version = f"failed ({type(e).__name__}: {e})"

    # Round-robin: every round runs every method once, so load changes on a shared machine hit all methods
    # alike. Wall time: minimum over rounds (the least-disturbed run); CPU time (process_time, all threads):
    # median over rounds, a measure of work that other processes' load barely moves.
    outs: dict[str, torch.Tensor | None] = {}
    wall: dict[str, list[float]] = {n: [] for n, _ in methods}
    cpu: dict[str, list[float]] = {n: [] for n, _ in methods}
    with torch.no_grad():
        for n, fn in methods:  # warm-up, and the outputs for the correctness check
            outs[n] = fn()
        for r in range(args.repeats):
            for n, fn in methods[r % len(methods) :] + methods[: r % len(methods)]:
                c0, t0 = time.process_time(), time.perf_counter()
                fn()
                wall[n].append(time.perf_counter() - t0)
                cpu[n].append(time.process_time() - c0)
            print(f"  round {r + 1}/{args.repeats} done", flush=True)
    rows = [(n, min(wall[n]), statistics.median(cpu[n]), outs[n]) for n, _ in methods]

    ref = rows[0][3]
    full_w, full_c = rows[0][1], rows[0][2]
    trunc_w, trunc_c = rows[2][1], rows[2][2]
    print()
    print(
        f"Gemma 3 270M (fp32, CPU), batch {B} x {T} tokens, {args.repeats} round-robin rounds after 1 warm-up; "
        f"model load {load_s:.1f} s"
    )
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), python {platform.python_version()}"
    )
    print()
    print(
        "| method | wall s (min) | CPU s (median) | speed-up vs full+hidden_states (wall / CPU) "
        "| time vs truncated forward (wall / CPU) | max abs diff |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, w, c, out in rows:
        diff = "" if out is None else f"{(out.float() - ref).abs().max().item():.1e}"
        print(
            f"| {name} | {w:.3f} | {c:.3f} | {full_w / w:.1f}x / {full_c / c:.1f}x "
            f"| {w / trunc_w:.2f} / {c / trunc_c:.2f} | {diff} |"
        )
    cap_w, cap_c = rows[3][1], rows[3][2]
    print()
    print(
        f"target 1: capture >= 8x faster than full forward with hidden states: {full_w / cap_w:.1f}x wall, "
        f"{full_c / cap_c:.1f}x CPU -> {'met' if min(full_w / cap_w, full_c / cap_c) >= 8 else 'NOT met'}"
    )
    print(
        f"target 2: capture <= 10% slower than the truncated forward: {100 * (cap_w / trunc_w - 1):+.1f}% wall, "
        f"{100 * (cap_c / trunc_c - 1):+.1f}% CPU -> "
        f"{'met' if max(cap_w / trunc_w, cap_c / trunc_c) <= 1.10 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
