"""Rules every experiment module keeps, checked over the sources: the engine owns seeds, threads, workers
and timing; statistics come from iclr26.stats; verdicts are declared beside the code."""

from __future__ import annotations

import inspect
import re

import pytest

from iclr26 import registry

IMPLEMENTED = registry.implemented()

# (pattern, what it does, what to do instead)
FORBIDDEN = [
    (r"\bset_num_threads\s*\(|threadpool_limits|ICLR26_THREADS|ICLR26_WORKERS|set_num_interop_threads",
     "sets threads or workers", "leave it to the engine (--threads / --workers, WORKLOAD)"),
    (r"\btime\.(perf_counter|process_time|time|monotonic)\s*\(", "times itself",
     "the engine records wall and CPU time; speed claims use counts, speed ratios go to bench/"),
    # numpy's legacy global generator and Python's ``random`` module; torch's global generator may be seeded
    # from ctx.seed right before a model is built (nn.Module init reads it): the perturbation test in
    # test_common.py checks that no result depends on the global state a run starts with
    (r"\bnp\.random\.(seed|rand|randn|randint|choice|permutation|shuffle|normal|uniform|random)\s*\(|"
     r"\brandom\.(seed|random|choice|shuffle|randint|sample)\s*\(",
     "uses global random state", "derive a generator from ctx.seed (np.random.default_rng, torch.Generator)"),
    (r"def _(auc|auroc|spearman|ci|paired_ci|bootstrap\w*|percentile\w*|mmd\w*|tpr\w*)\s*\(",
     "keeps a private statistics helper", "call iclr26.stats"),
]


def _source(slug: str) -> str:
    return inspect.getsource(registry.get(slug).load())


@pytest.mark.parametrize("slug", IMPLEMENTED)
@pytest.mark.parametrize("rule", range(len(FORBIDDEN)), ids=["threads", "timing", "global-rng", "private-stats"])
def test_experiment_source_keeps_the_rules(slug, rule):
    pattern, what, instead = FORBIDDEN[rule]
    src = _source(slug)
    hits = [f"line {src[: m.start()].count(chr(10)) + 1}: {m.group(0)}" for m in re.finditer(pattern, src)]
    assert not hits, f"{slug} {what} ({'; '.join(hits)}); {instead}"


def test_rules_catch_what_they_name():
    samples = ["torch.set_num_threads(2)", "t0 = time.perf_counter()", "np.random.seed(0)",
               "def _spearman(x, y):"]
    for (pattern, _, _), text in zip(FORBIDDEN, samples, strict=True):
        assert re.search(pattern, text), text
    assert not re.search(FORBIDDEN[2][0], "rng = np.random.default_rng(ctx.seed)")
