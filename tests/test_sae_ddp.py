"""SAE training under torchrun (2 CPU processes, gloo) equals single-process training on the same batches."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from safetensors.torch import save_file

from iclr26.interp.sae import SparseDictionary
from iclr26.interp.train import SAETrainer
from iclr26.interp.train_cli import main


def test_cli_help(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    assert "torchrun" in capsys.readouterr().out


@pytest.mark.parametrize("activation", ["topk"])
def test_two_process_ddp_matches_single_process(tmp_path, activation):
    from iclr26.data.sparse_dictionary import sparse_dictionary_activations

    X = sparse_dictionary_activations(2048, 16, 48, 3.0, seed=3).X
    save_file({"acts": X}, str(tmp_path / "acts.safetensors"))
    args = dict(
        n_latents=32,
        k=3,
        steps=20,
        batch_size=128,
        lr=3e-3,
        init_seed=5,
        data_seed=6,
        dead_after_tokens=128 * 4,
    )  # small threshold so the AuxK path and the fired all-reduce run
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "iclr26.interp.train_cli",
        "--data",
        str(tmp_path / "acts.safetensors"),
        "--out",
        str(tmp_path / "ddp"),
        "--activation",
        activation,
        "--device",
        "cpu",
        "--log-every",
        "5",
    ] + [f"--{k.replace('_', '-')}={v}" for k, v in args.items()]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ICLR26_PROGRESS": "0"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    if proc.returncode != 0 and "exitcode: -6" in proc.stderr:
        # a worker aborted while the gloo group came up (seen once when the other xdist worker was also busy,
        # never reproduced alone): launch once more; a wrong result still fails the asserts below
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ddp = SparseDictionary.load(tmp_path / "ddp")
    info = json.loads((tmp_path / "ddp" / "train.json").read_text())
    assert info["world_size"] == 2 and info["n_steps"] == 20

    single = SAETrainer(activation=activation, log_every=5, **args).fit(X)
    assert info["batch_hash"] == single.batch_hash_
    for name, p in single.sae_.named_parameters():
        torch.testing.assert_close(getattr(ddp, name), p.detach(), rtol=1e-4, atol=1e-4, msg=name)
    # logged statistics are reduced over ranks, so they match too
    for h_ddp, h_one in zip(info["history"], single.history_, strict=True):
        assert h_ddp["fvu"] == pytest.approx(h_one["fvu"], rel=1e-3)
        assert h_ddp["l0"] == pytest.approx(h_one["l0"], rel=1e-6)
