"""parallel_map (process-level arms) and the thread policy: serial and parallel results are bit-identical."""

from __future__ import annotations

import os

import pytest
import torch

from iclr26.core import threads as th
from iclr26.core.errors import UserError
from iclr26.core.parallel import in_worker, parallel_map


def _train_tiny(seed: int) -> dict:
    """A few Adam steps of a small MLP, everything seeded from the item (as experiment arms are)."""
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.SiLU(), torch.nn.Linear(64, 16))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(256, 16, generator=g)
    for _ in range(20):
        loss = (net(x) - x.flip(1)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {"state": net.state_dict(), "threads": torch.get_num_threads(), "loss": float(loss.detach())}


def _with_common(item: int, common: dict) -> float:
    return float(common["x"][item].sum()) + common["offset"]


def _pid(_item: int) -> tuple[int, bool]:
    return os.getpid(), in_worker()


def _fail(item: int) -> int:
    if item == 2:
        raise UserError("item 2 is bad")
    return item


def test_parallel_results_bit_identical_to_serial():
    seeds = [3, 1, 4, 1, 5]
    serial = parallel_map(_train_tiny, seeds, workers=1)
    par = parallel_map(_train_tiny, seeds, workers=2)
    assert len(par) == len(seeds)
    for a, b in zip(serial, par, strict=True):
        assert a["threads"] == b["threads"] == 1
        assert a["loss"] == b["loss"]
        assert all(torch.equal(a["state"][k], b["state"][k]) for k in a["state"])
    # different seeds really give different models (the comparison above can fail)
    assert not torch.equal(serial[0]["state"]["0.weight"], serial[1]["state"]["0.weight"])
    # the same seed twice (items 1 and 3) gives the same model
    assert torch.equal(par[1]["state"]["0.weight"], par[3]["state"]["0.weight"])


def test_serial_path_in_process_and_workers_elsewhere():
    me = os.getpid()
    assert parallel_map(_pid, [0, 1], workers=1) == [(me, False), (me, False)]
    out = parallel_map(_pid, [0, 1, 2], workers=2)
    assert all(pid != me and inside for pid, inside in out)
    assert parallel_map(_with_common, [0, 2], workers=2, common={"x": torch.ones(3, 4), "offset": 0.5}) == [
        4.5,
        4.5,
    ]
    assert parallel_map(_with_common, [1], common={"x": torch.ones(3, 2), "offset": 1.0}) == [3.0]


def test_worker_errors_reach_the_caller():
    with pytest.raises(UserError, match="item 2 is bad"):
        parallel_map(_fail, [0, 1, 2, 3], workers=2)
    with pytest.raises(UserError, match="workers"):
        parallel_map(_pid, [0], workers=0)


def test_thread_policy_precedence(monkeypatch):
    monkeypatch.delenv(th.ENV_THREADS, raising=False)
    monkeypatch.delenv(th.ENV_WORKERS, raising=False)
    cpus = th.cpu_count()
    small = th.thread_policy("small")
    assert (small.threads, small.workers, small.source) == (1, cpus, "workload")
    dense = th.thread_policy("dense")
    assert (dense.threads, dense.workers) == (cpus, 1)
    assert th.thread_policy("small", requested=3).threads == 3  # a config's explicit request wins
    assert th.thread_policy(None).source == "unchanged"
    monkeypatch.setenv(th.ENV_THREADS, "2")
    monkeypatch.setenv(th.ENV_WORKERS, "5")
    env = th.thread_policy("small", requested=3)
    assert (env.threads, env.workers, env.source) == (2, 5, "env")
    monkeypatch.setenv(th.ENV_WORKERS, "zero")
    with pytest.raises(UserError, match="ICLR26_WORKERS"):
        th.thread_policy("small")
    with pytest.raises(UserError, match="unknown workload"):
        th.thread_policy("huge")


def test_apply_thread_policy_sets_and_restores(monkeypatch):
    monkeypatch.delenv(th.ENV_THREADS, raising=False)
    monkeypatch.delenv(th.ENV_WORKERS, raising=False)
    before = torch.get_num_threads()
    assert th.active_plan() is None and th.default_workers() == 1
    threads, restore = th.apply_thread_policy(th.thread_policy("small"))
    try:
        assert threads == 1 == torch.get_num_threads()
        assert th.default_workers() == th.cpu_count()
    finally:
        restore()
    assert torch.get_num_threads() == before and th.active_plan() is None


def test_single_threaded_restores_the_thread_counts():
    """single_threaded() pins torch (and BLAS, via threadpoolctl) to one thread inside the block only."""
    import torch

    from iclr26.core.threads import single_threaded

    prev = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with single_threaded():
            assert torch.get_num_threads() == 1
            try:
                from threadpoolctl import threadpool_info
            except ImportError:
                pass
            else:
                assert all(p["num_threads"] == 1 for p in threadpool_info())
        assert torch.get_num_threads() == 2
        with pytest.raises(RuntimeError), single_threaded():
            raise RuntimeError("boom")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(prev)
