"""``sae_edit`` during ``generate``: overhead over the unedited model, and equality with a plain-hook baseline.

One run, side by side, on the same model and SAE (P10's steering rule f_j += k·ref with the error term kept):

1. plain greedy ``generate`` (KV cache on);
2. the same inside ``iclr26.interp.sae_edit(model, sae, add_scaled(j, k, ref))`` at ``layers.{L}.resid_post``
   (with the reference held at a number the latent shift is constant, so sae_edit adds k·ref·W_dec[j] without
   encoding); 2b. the same edit passed as a plain callable, which takes the general path (encode, edit, decode the
   difference) that data-dependent edits use;
3. a plain PyTorch forward hook on the decoder layer that computes the same edit by hand from the SAE's weights
   (TopK: pre = (x − b_dec)·W_enc + b_enc, ReLU, keep the top k; x' = x + (f' − f)·W_dec) — the baseline an
   nnsight / SAELens ``HookedSAETransformer`` user writes (SAELens' transformer needs a TransformerLens model, which
   cannot be built offline from these HF checkpoints).

Reported: median time of each over round-robin repeats, the overhead of 2 over 1 (target: at most 10 %), whether 2
and 3 give the same tokens (and the max |Δlogit| of one full forward), whether the steered tokens differ from the
plain ones, and whether the identity edit (k = 0) reproduces the plain tokens.

Run: ``.venv/bin/python bench/sae_edit_overhead.py [--tiny] [--threads 1] [--repeats 5] [--new-tokens 32]``
(default model: Gemma 3 270M from the offline package; ``--tiny``: a random 6-layer d=128 Llama).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch


def _model(tiny: bool):
    if tiny:
        from iclr26.lm import WordTokenizer, tiny_lm

        tok = WordTokenizer([f"w{i}" for i in range(500)])
        return tiny_lm("llama", d=128, layers=6, heads=4, vocab=len(tok), ctx=256, seed=0), tok
    from iclr26.lm import load_model

    return load_model("gemma-3-270m")


def _sae(d: int, n: int, k: int, site: str):
    from iclr26.interp.sae import SparseDictionary

    g = torch.Generator().manual_seed(0)
    sae = SparseDictionary(d, n, activation="topk", k=k, input_site=site)
    with torch.no_grad():
        W = torch.randn(n, d, generator=g)
        sae.W_dec.copy_(W / W.norm(dim=1, keepdim=True))
        sae.W_enc_T.copy_(sae.W_dec)
        sae.b_enc.copy_(0.01 * torch.randn(n, generator=g))
    return sae.eval()


def _hand_hook(sae, j: int, add: float):
    """Forward hook computing the TopK SAE edit from the raw weights (no iclr26 code)."""
    W_enc = sae.W_enc_T.detach().T  # [d, n]
    b_enc, W_dec, b_dec = sae.b_enc.detach(), sae.W_dec.detach(), sae.b_dec.detach()

    def hook(_mod, _args, out):
        x = out[0] if isinstance(out, tuple) else out  # [B, T, d]
        pre = torch.relu((x.float() - b_dec) @ W_enc + b_enc)
        top = pre.topk(sae.k, dim=-1)
        f = torch.zeros_like(pre).scatter(-1, top.indices, top.values)
        f2 = f.clone()
        f2[..., j] += add
        x2 = x + ((f2 @ W_dec + b_dec) - (f @ W_dec + b_dec)).to(x.dtype)
        return (x2, *out[1:]) if isinstance(out, tuple) else x2

    return hook


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=32)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from iclr26.interp.sae_edit import add_scaled, sae_edit
    from iclr26.lm.sites import get_adapter

    model, tok = _model(args.tiny)
    model.eval()
    L = model.config.num_hidden_layers // 2
    d = model.config.hidden_size
    site = f"layers.{L}.resid_post"
    sae = _sae(d, 4 * d, 32, site)
    ids = torch.randint(4, min(len(tok), 20000), (args.batch, args.seq), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        h = model(input_ids=ids, output_hidden_states=True).hidden_states[L + 1]
        ref = float(sae.encode(h.float()).amax())  # the P10 reference, held fixed over the decoding steps
    j, k = 7, 1.0
    layer = get_adapter(model).resolve(site).module
    gen = dict(max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, do_sample=False,
               pad_token_id=tok.pad_token_id or 0)  # fmt: skip

    def plain():
        return model.generate(ids, **gen)

    def ours(kk=k):
        with sae_edit(model, sae, add_scaled(j, kk, ref=ref), site=site):
            return model.generate(ids, **gen)

    def ours_encoded():  # the same edit as a plain callable: sae_edit encodes, edits and decodes the difference
        edit = add_scaled(j, k, ref=ref)
        with sae_edit(model, sae, lambda f: edit(f), site=site):
            return model.generate(ids, **gen)

    def hand():
        hd = layer.register_forward_hook(_hand_hook(sae, j, k * ref))
        try:
            return model.generate(ids, **gen)
        finally:
            hd.remove()

    fns = {"plain generate": plain, "iclr26 sae_edit": ours, "iclr26 sae_edit, general (encoding) path": ours_encoded,
           "plain hook (hand-written SAE edit)": hand}
    times: dict[str, list[float]] = {n: [] for n in fns}
    outs = {}
    with torch.no_grad():
        for f in fns.values():
            f()  # warm-up
        for _ in range(args.repeats):  # round robin so load drift biases nobody
            for n, f in fns.items():
                t0 = time.perf_counter()
                outs[n] = f()
                times[n].append(time.perf_counter() - t0)
        identity = ours(0.0)
        with sae_edit(model, sae, add_scaled(j, k, ref=ref), site=site):
            lo = model(input_ids=ids).logits
        hd = layer.register_forward_hook(_hand_hook(sae, j, k * ref))
        try:
            lh = model(input_ids=ids).logits
        finally:
            hd.remove()
    same = torch.equal(outs["iclr26 sae_edit"], outs["plain hook (hand-written SAE edit)"])
    changed = not torch.equal(outs["iclr26 sae_edit"], outs["plain generate"])
    ident = torch.equal(identity, outs["plain generate"])
    base = statistics.median(times["plain generate"])
    name = "tiny Llama d=128 x6" if args.tiny else "Gemma 3 270M"
    print(f"model {name}, SAE TopK {4 * d} latents k=32 at {site}, batch {args.batch} x {args.seq} prompt tokens, "
          f"{args.new_tokens} new tokens, {args.threads} thread(s), load {os.getloadavg()[0]:.1f}\n")
    print("| method | median s | note |\n|---|---|---|")
    for n, ts in times.items():
        med = statistics.median(ts)
        note = "" if n == "plain generate" else f"overhead {100 * (med / base - 1):+.1f} %"
        if n.startswith("plain hook"):
            note += (f"; same tokens as sae_edit: {same}; max abs logit diff (one forward) "
                     f"{float((lo - lh).abs().max()):.2e}")
        if n == "iclr26 sae_edit":
            note += f"; steered tokens differ from plain: {changed}; identity edit (k=0) = plain tokens: {ident}"
        if n.startswith("iclr26 sae_edit, general"):
            note += f"; same tokens as sae_edit: {torch.equal(outs[n], outs['iclr26 sae_edit'])}"
        print(f"| {n} | {med:.3f} | {note} |")
    return 0 if same and ident else 1


if __name__ == "__main__":
    raise SystemExit(main())
