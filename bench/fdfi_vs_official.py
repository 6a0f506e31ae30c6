"""FDFI: iclr26.flows.fdfi side by side with the official ``fdfi`` package (PyPI, pinned 0.1.0).

One run on the paper's Experiment 1 design (d=20, rho=0.8): a random forest is fitted on 600
draws and explained on 300 fresh draws with B resamples per feature. Two pairs are compared:

* DFI-OT: our ``GaussianDisentangler`` (standardize=False) vs ``fdfi.OTExplainer`` — identical draws,
  so the estimates must agree to floating-point precision;
* FDFI: our ``FlowDisentangler`` (fixed-step RK4) vs ``fdfi.FlowExplainer`` (torchdiffeq dopri5) —
  each trains its own flow with the same steps / batch / lr, so estimates agree only statistically.

Usage: .venv/bin/python bench/fdfi_vs_official.py [--steps 1500] [--resamples 10] [--threads 1]
Prints a markdown table (the numbers for bench/results/fdfi.md).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from scipy.stats import spearmanr
from sklearn.ensemble import RandomForestRegressor

from iclr26.data.feature_importance import correlated_blocks
from iclr26.flows.fdfi import FDFI
from iclr26.flows.fdfi_stats import infer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--resamples", type=int, default=10)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    try:
        import fdfi
        from fdfi.explainers import FlowExplainer, OTExplainer
    except ImportError:
        raise SystemExit(
            "the official package is not installed: .venv/bin/pip install fdfi torchdiffeq torch==2.13.0"
        ) from None
    version = getattr(fdfi, "__version__", "?")

    train = correlated_blocks(600, rho=0.8, seed=1)
    bg = correlated_blocks(3000, rho=0.8, seed=2)
    ev = correlated_blocks(args.n, rho=0.8, seed=3)
    rf = RandomForestRegressor(50, min_samples_leaf=5, max_features=0.5, n_jobs=1, random_state=0)
    f = rf.fit(train.X, train.y).predict
    B = args.resamples
    rows = []

    def decisions(u):
        return infer(u, y=ev.y).rejected

    # --- DFI-OT
    t = time.perf_counter()
    # the package has no Jacobian screen or poor-map fallback: compare like with like
    ours_ot = FDFI("gaussian", n_resamples=B, standardize=False, seed=0, screen_jacobian=False).fit(bg.X)
    u_ot = ours_ot.ueifs(f, ev.X, ev.y)
    t_ours = time.perf_counter() - t
    t = time.perf_counter()
    ot = OTExplainer(f, data=bg.X, nsamples=B, random_state=0, method="cpi", compute_diagnostics=False)
    r_ot = ot(ev.X, y=ev.y)
    t_off = time.perf_counter() - t
    rows.append(("DFI-OT", "-", f"{t_ours:.2f}", "-", f"{t_off:.2f}",
                 f"{np.abs(u_ot.x_cpi.mean(0) - r_ot['phi_X']).max():.1e}",
                 f"{spearmanr(u_ot.x_cpi.mean(0), r_ot['phi_X'])[0]:.3f}",
                 f"{(decisions(u_ot.x_cpi) == decisions(np.asarray(ot.ueifs_X))).mean():.2f}"))  # fmt: skip

    # --- FDFI with a flow
    t = time.perf_counter()
    ours = FDFI("flow", n_resamples=B, standardize=False, jacobian="average", n_jacobian=50, seed=0,
                screen_jacobian=False, poor_map="keep",
                flow_kwargs=dict(steps=args.steps, batch_size=512, lr=5e-4, ode_method="rk4", ode_steps=8))  # fmt: skip
    ours.fit(bg.X)
    t_fit = time.perf_counter() - t
    t = time.perf_counter()
    u = ours.ueifs(f, ev.X, ev.y)
    t_exp = time.perf_counter() - t
    t = time.perf_counter()
    off = FlowExplainer(f, data=bg.X, nsamples=B, method="cpi", random_state=0, fit_flow=False, verbose=False,
                        compute_diagnostics=False)  # fmt: skip
    off.fit_flow(num_steps=args.steps, verbose=False)
    o_fit = time.perf_counter() - t
    t = time.perf_counter()
    r = off(ev.X, y=ev.y)
    o_exp = time.perf_counter() - t
    rows.append(("FDFI (flow)", f"{t_fit:.1f}", f"{t_exp:.1f}", f"{o_fit:.1f}", f"{o_exp:.1f}",
                 f"{np.abs(u.x_cpi.mean(0) - r['phi_X']).max():.1e}",
                 f"{spearmanr(u.x_cpi.mean(0), r['phi_X'])[0]:.3f}",
                 f"{(decisions(u.x_cpi) == decisions(np.asarray(off.ueifs_X))).mean():.2f}"))  # fmt: skip

    print(f"FDFI vs official fdfi {version}: d=20, rho=0.8, n_eval={args.n}, B={B}, flow steps={args.steps}, "
          f"torch threads={args.threads}\n")  # fmt: skip
    print("| method | iclr26 fit (s) | iclr26 explain (s) | fdfi fit (s) | fdfi explain (s) | max abs diff phi_X "
          "| Spearman phi_X | same decision |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    c1 = [0, 1, 2, 3, 4]
    print(f"\nphi_X on C1 (iclr26 flow): {np.round(u.x_cpi.mean(0)[c1], 4).tolist()}")
    print(f"phi_X on C1 (fdfi flow):   {np.round(r['phi_X'][c1], 4).tolist()}")


if __name__ == "__main__":
    main()
