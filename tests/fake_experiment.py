"""A tiny experiment module used to test the CLI, engine and report without a real paper."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from iclr26.core import param  # noqa: E402
from iclr26.core.errors import MissingAssetError  # noqa: E402
from iclr26.runs import Result, RunContext, claim  # noqa: E402
from iclr26.stats import bootstrap  # noqa: E402

DESCRIPTION = "Estimates the mean of a normal sample; the claim is that it is close to the truth."


@dataclass
class Config:
    n: int = param(1000, "sample size")
    mu: float = param(0.5, "true mean")
    mode: str = param("ok", "behaviour for tests", choices=["ok", "missing", "interrupt"])
    widths: list[int] = param([1, 2], "a list field")


PRESETS = {"smoke": {"n": 50}, "default": {}, "paper": {"n": 100000}}
SEEDS = {"paper": 3}
HEADLINE = "C1"
EXPECTED = {"C1": "held"}


def run(cfg: Config, ctx: RunContext) -> Result:
    if cfg.mode == "missing":
        raise MissingAssetError("the fake asset", "pip install fake-asset")
    rng = np.random.default_rng(ctx.seed)
    x = rng.normal(cfg.mu, 1.0, size=cfg.n)
    fig, ax = plt.subplots()
    ax.hist(x, bins=20)
    ctx.save_figure(fig, "hist", caption="histogram of the sample")
    ctx.note_cache("fake-model", hit=ctx.seed % 2 == 1, build_seconds=0.5)  # machine state, for env.json
    if cfg.mode == "interrupt":
        raise KeyboardInterrupt
    err = abs(x.mean() - cfg.mu)
    est = bootstrap(x - cfg.mu, lambda v: abs(v.mean()), unit="draw", seed=ctx.seed)
    null = bootstrap(x - cfg.mu + 1.0, lambda v: abs(v.mean()), unit="draw", seed=ctx.seed)  # a biased estimator
    return Result(metrics={"mean": float(x.mean()), "abs_err": float(err)},
                  claims=[claim("C1", "sample mean within 0.2 of the truth", est, "<", 0.2, null=null,
                                null_what="estimator off by 1"),
                          claim("C2", "a reported-only claim", err, ">", 10.0, gated=False)],
                  notes="fake run")
