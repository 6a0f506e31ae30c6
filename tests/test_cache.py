"""The trained-artefact cache: where it lives, listing and clearing, and the folder names a cold-cache check drops."""

from __future__ import annotations

import fnmatch

import pytest

from iclr26.core.cache import KINDS, _homes, clear_cache, list_cache
from iclr26.core.errors import UserError

# ../shared/tools/verdict-check builds a "cold" cache by linking every top-level folder of the user's cache except
# these (the data assets stay, trained models go). A trained-model folder that none of them matches is silently
# reused, and the check is warm: that happened to the DDPMs while their folder was called "diffusion".
COLD_CACHE_DROPS = ("*organism*", "*ddpm*", "*models*")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR26_CACHE", str(tmp_path))
    monkeypatch.delenv("ICLR26_ORGANISMS", raising=False)
    return tmp_path


def test_trained_model_folders_are_ones_a_cold_cache_check_drops(cache):
    for kind, home in _homes().items():
        assert home.parent == cache, kind
        assert any(fnmatch.fnmatch(home.name, pat) for pat in COLD_CACHE_DROPS), (kind, home.name)


def test_list_and_clear_by_kind(cache):
    homes = _homes()
    (homes["organisms"] / "org-a").mkdir(parents=True)
    (homes["organisms"] / "org-a" / "w.safetensors").write_bytes(b"x" * 1000)
    (homes["diffusion"] / "ddpm-b").mkdir(parents=True)
    rows = list_cache()
    assert sorted((r["kind"], r["name"]) for r in rows) == [("diffusion", "ddpm-b"), ("organisms", "org-a")]
    assert next(r for r in rows if r["name"] == "org-a")["size_mb"] == pytest.approx(0.001)
    assert clear_cache("diffusion") == 1
    assert [r["name"] for r in list_cache()] == ["org-a"]
    assert clear_cache() == 1
    assert list_cache() == []


def test_unknown_kind_names_the_allowed_ones(cache):
    with pytest.raises(UserError, match="unknown cache kind 'ddpm'.*organisms, diffusion"):
        clear_cache("ddpm")
    assert KINDS == ("organisms", "diffusion")
