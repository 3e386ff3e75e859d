"""The GPU preflight: the stack (torch's CUDA build, vllm, deepspeed at the pins) and the machine (GPU count, bf16),
checked against stand-in machines, and the lock files it points to."""

import re
import tomllib
from pathlib import Path

import pytest

from dgro_lib.cli.preflight import Machine, needs_gpu, pinned_versions, preflight, profile_configs

ROOT = Path(__file__).resolve().parents[1]
PINS = {"torch": "2.13.0", "vllm": "0.31.0", "deepspeed": "0.19.8"}


def node(gpus=8, *, torch="2.13.0", cuda="13.0", vllm="0.31.0", deepspeed="0.19.8", bf16=True) -> Machine:
    return Machine(versions={"torch": torch, "vllm": vllm, "deepspeed": deepspeed}, torch_cuda=cuda, gpus=gpus,
                   bf16=bf16)


def test_pins_are_pyprojects():
    """The pins come from the installed metadata; pyproject.toml, read directly, says the same."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    want = {m.group(1): m.group(2) for r in reqs if (m := re.fullmatch(r"(torch|vllm|deepspeed)==([\d.]+)", r))}
    assert pinned_versions() == want == PINS


def test_paper_profile_passes_on_an_8_gpu_node():
    assert preflight(profile_configs("paper"), machine=node(8), pins=PINS) == []


def test_stack_only_passes_on_a_gpu_node():
    assert preflight(None, machine=node(1), pins=PINS) == []


def test_cpu_torch_is_refused_by_name():
    problems = preflight(profile_configs("paper"), machine=node(0, torch="2.13.0+cpu", cuda=None), pins=PINS)
    assert any("2.13.0+cpu is a CPU build" in p and "make venv-gpu" in p for p in problems), problems


def test_cuda_build_without_a_visible_gpu():
    problems = preflight(None, machine=node(0), pins=PINS)
    assert len(problems) == 1 and "sees no GPU" in problems[0] and "CUDA_VISIBLE_DEVICES" in problems[0]


def test_too_few_gpus_names_the_file_and_key():
    """DGRO Table 3 (math) trains over 8 GPUs, the K&K files over 4: a 4-GPU node refuses only the former."""
    assert preflight(profile_configs("paper", ["dgro_fig2_beta"]), machine=node(4), pins=PINS) == []
    problems = preflight(profile_configs("paper", ["dgro_table3_math"]), machine=node(4), pins=PINS)
    assert problems and all("paper/dgro_table3_math.yaml" in p for p in problems)
    assert any("train.num_processes: 8" in p and "4 GPU(s)" in p for p in problems), problems


@pytest.mark.parametrize("package,version", [("vllm", "0.30.1"), ("vllm", None), ("deepspeed", "0.18.0"),
                                             ("torch", "2.12.1")])
def test_wrong_or_missing_package_is_named(package, version):
    problems = preflight(None, machine=node(8, **{package: version}), pins=PINS)
    assert len(problems) == 1 and problems[0].startswith(package), problems
    assert (version or "not installed") in problems[0]


def test_bf16_refused_on_a_gpu_without_it():
    configs = profile_configs("paper", ["dgro_fig2_beta"])
    assert any(c.train.bf16 for c in configs.values())
    problems = preflight(configs, machine=node(8, bf16=False), pins=PINS)
    assert problems and all("train.bf16" in p for p in problems)


def test_cpu_profiles_need_no_gpu_and_gpu_profiles_do():
    assert not any(needs_gpu(c) for c in profile_configs("cpu").values())
    gpu = profile_configs("gpu")
    assert all(needs_gpu(c) for k, c in gpu.items() if c.kind == "train")


def test_reproduce_stops_a_gpu_profile_before_any_notebook(capsys, monkeypatch):
    """On this CPU machine `reproduce --profile gpu` exits 1 naming the CPU build, and runs no notebook."""
    import torch

    from dgro_lib.cli import reproduce

    if torch.version.cuda is not None and torch.cuda.is_available():
        pytest.skip("a GPU machine: the preflight passes here")
    ran = []
    monkeypatch.setattr(reproduce, "run_notebook", lambda *a, **k: ran.append(a))
    assert reproduce.main(["--profile", "gpu", "--only", "dgro_fig2_beta"]) == 1
    assert ran == [] and "CPU build" in capsys.readouterr().err


def _pins(path: Path) -> dict[str, str]:
    return {m.group(1).lower(): m.group(2) for line in path.read_text().splitlines()
            if (m := re.match(r"^([A-Za-z0-9_.-]+)==(\S+) \\$", line))}


@pytest.mark.parametrize("lock", ["cpu", "cuda"])
def test_lock_files_pin_the_projects_pins_with_hashes(lock):
    """Each lock pins torch, trl and deepspeed as pyproject does, every entry with a sha256, and deepspeed alone in
    its second-pass file; the CPU lock holds torch's CPU build, the CUDA lock PyPI's (CUDA) build and vLLM."""
    main, ds = ROOT / "requirements" / f"{lock}.txt", ROOT / "requirements" / f"{lock}-deepspeed.txt"
    pins, ds_pins = _pins(main), _pins(ds)
    assert ds_pins == {"deepspeed": PINS["deepspeed"]} and "deepspeed" not in pins
    assert pins["trl"] == "1.16.0" and pins["torch"] == ("2.13.0+cpu" if lock == "cpu" else "2.13.0")
    assert (pins.get("vllm") == PINS["vllm"]) == (lock == "cuda")
    for path in (main, ds):
        blocks = re.split(r"\n(?=[A-Za-z0-9])", path.read_text())
        for b in blocks:
            if re.match(r"^[A-Za-z0-9_.-]+==", b):
                assert "--hash=sha256:" in b, f"{path.name}: no hash for {b.splitlines()[0]}"


def test_cpu_lock_is_the_tested_environment():
    """The CPU lock is what this environment runs (the references were computed with it): every package the lock
    pins is installed at that version."""
    import importlib.metadata as md

    import torch

    if torch.version.cuda is not None:
        pytest.skip("a CUDA build of torch: this environment is requirements/cuda.txt's")
    pins = _pins(ROOT / "requirements" / "cpu.txt") | _pins(ROOT / "requirements" / "cpu-deepspeed.txt")
    wrong = {}
    for name, version in pins.items():
        try:
            have = md.version(name)
        except md.PackageNotFoundError:
            have = None
        if have != version:
            wrong[name] = (version, have)
    assert not wrong, f"installed versions differ from requirements/cpu.txt (locked, installed): {wrong}"


def test_every_notebook_has_gpu_params_that_are_the_cpu_recipe_on_a_gpu():
    """The gpu profile covers every notebook, and each file is the cpu profile's experiment on a GPU: only the seeds,
    the parallel workers and the GPU keys differ, and every training file refuses to start without CUDA."""
    from dgro_lib.config import config_to_dict, find_params, load_config
    from dgro_lib.cli.reproduce import list_notebooks
    from dgro_lib.runs.store import config_diff

    gpu_only = {"seeds", "workers", "train.cpu", "train.require_gpu", "train.gpu_memory_gb"}
    for name in list_notebooks():
        cpu, gpu = (load_config(find_params(name, p)) for p in ("cpu", "gpu"))
        assert set(config_diff(config_to_dict(cpu), config_to_dict(gpu))) <= gpu_only, name
        if gpu.kind == "train":
            assert gpu.train.require_gpu and not gpu.train.cpu, name
