"""core.io atomic writes, core.paths cache folders, the one Debian fetch, core.distributed on one process."""

from __future__ import annotations

import pytest
import torch

from iclr26 import assets
from iclr26.core import distributed, io, paths
from iclr26.core.errors import MissingAssetError, UserError


def _siblings(d):
    return sorted(p.name for p in d.iterdir())


def test_atomic_path_commits_on_success_and_keeps_old_file_on_error(tmp_path):
    target = tmp_path / "sub" / "fig.png"
    with io.atomic_path(target) as tmp:
        assert tmp.parent == target.parent and tmp.suffix == ".png" and tmp.name.startswith(".fig.png.tmp-")
        assert not target.exists()  # nothing under the final name while writing
        tmp.write_bytes(b"one")
    assert target.read_bytes() == b"one"
    with pytest.raises(RuntimeError), io.atomic_path(target) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("interrupted")
    assert target.read_bytes() == b"one" and _siblings(target.parent) == ["fig.png"]
    io.atomic_write_text(target, "two")
    io.atomic_write_json(tmp_path / "a.json", {"x": 1})
    io.atomic_write_bytes(tmp_path / "b.bin", b"\x00\x01")
    assert target.read_text() == "two" and (tmp_path / "a.json").read_text() == '{\n  "x": 1\n}'
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"


def test_atomic_dir_replaces_whole_folders(tmp_path):
    target = tmp_path / "cache"
    with io.atomic_dir(target) as tmp:
        (tmp / "a").write_text("1")
    assert _siblings(target) == ["a"]
    with pytest.raises(KeyError), io.atomic_dir(target) as tmp:
        (tmp / "b").write_text("2")
        raise KeyError("interrupted")
    assert _siblings(target) == ["a"] and _siblings(tmp_path) == ["cache"]
    with io.atomic_dir(target) as tmp:
        (tmp / "c").write_text("3")
    assert _siblings(target) == ["c"]  # the old folder is gone, not merged
    with pytest.raises(UserError, match="already exists"), io.atomic_dir(target, replace=False):
        pass
    assert _siblings(tmp_path) == ["cache"]


def test_save_tensors_round_trip_without_temp_files(tmp_path):
    t = {"w": torch.arange(6.0).reshape(2, 3)}
    io.save_tensors(tmp_path / "m" / "w.safetensors", t, {"k": 1})
    assert _siblings(tmp_path / "m") == ["cfg.json", "w.safetensors"]
    assert torch.equal(io.load_tensors(tmp_path / "m" / "w.safetensors")["w"], t["w"])
    assert io.load_cfg(tmp_path / "m") == {"k": 1}


def test_one_cache_root_honours_both_variables(tmp_path, monkeypatch):
    monkeypatch.delenv("ICLR26_DATA", raising=False)
    monkeypatch.setenv("ICLR26_CACHE", str(tmp_path / "c"))
    assert paths.cache_home() == tmp_path / "c" == paths.data_home()
    from iclr26.data import images
    from iclr26.lm import loading

    # every folder follows ICLR26_CACHE when ICLR26_DATA is unset (images used to ignore it)
    assert images.fashion_mnist_dir() == tmp_path / "c" / "fashion-mnist"
    assert assets.debian_dir("janeaustenr") == tmp_path / "c" / "janeaustenr"
    assert loading.gemma_cache_path() == tmp_path / "c" / "gemma-3-270m"
    monkeypatch.setenv("ICLR26_DATA", str(tmp_path / "d"))
    assert paths.data_home() == tmp_path / "d" and paths.cache_home() == tmp_path / "c"
    assert images.fashion_mnist_dir() == tmp_path / "d" / "fashion-mnist"
    monkeypatch.delenv("ICLR26_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert paths.cache_home() == tmp_path / "home" / ".cache" / "iclr26"


def test_unpack_debian_without_apt_names_manual_commands(tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR26_DATA", str(tmp_path))
    monkeypatch.setattr(assets.shutil, "which", lambda name: None)
    with pytest.raises(MissingAssetError, match=r"apt-get download r-cran-janeaustenr && dpkg -x"):
        assets.unpack_debian("janeaustenr")
    assert assets.fetch_debian("fashion-mnist", quiet=True) is None
    with pytest.raises(UserError, match="unknown Debian asset"):
        assets.debian_dir("mnist")
    # an already unpacked folder is returned without calling apt at all
    (tmp_path / "fashion-mnist").mkdir()
    (tmp_path / "fashion-mnist" / "x").write_text("")
    assert assets.unpack_debian("fashion-mnist") == tmp_path / "fashion-mnist"


def test_distributed_helpers_are_no_ops_on_one_process():
    assert distributed.dist_info() == (0, 1)
    with distributed.distributed_from_env("cpu") as (rank, world, dev):
        assert (rank, world, dev) == (0, 1, torch.device("cpu"))
    p = torch.nn.Parameter(torch.ones(3))
    p.grad = torch.full((3,), 2.0)
    distributed.all_reduce_grads_([p])
    t = torch.ones(2)
    assert distributed.all_reduce_(t, "max") is t and torch.equal(p.grad, torch.full((3,), 2.0))
    with pytest.raises(UserError, match="allowed: sum, max, min"):
        distributed.all_reduce_(t, "mean")
