"""A second fake experiment for multi-paper runs: it crashes, lacks an asset, or records a missing one."""

from __future__ import annotations

from dataclasses import dataclass

from iclr26.core import param
from iclr26.core.errors import MissingAssetError
from iclr26.runs import Result, RunContext, claim

DESCRIPTION = "Fails on purpose (tests of `run all`)."


@dataclass
class Config:
    behaviour: str = param("crash", "how to behave", choices=["crash", "missing", "note-missing"])
    steps: int = param(3, "a field the other fake paper does not have", low=1, high=10)


PRESETS = {"smoke": {}, "default": {}, "paper": {}}


def run(cfg: Config, ctx: RunContext) -> Result:
    if cfg.behaviour == "crash":
        raise RuntimeError("boom")
    if cfg.behaviour == "missing":
        raise MissingAssetError("the fake dataset", "pip install fake-data")
    ctx.note_missing_asset("the fake dataset", "pip install fake-data", skipped="part (b) skipped")
    return Result(metrics={"x": 1.0}, claims=[claim("C1", "one is positive", 1.0, ">", 0.0, null=0.0)])
