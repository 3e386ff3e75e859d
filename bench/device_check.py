"""The one prepared device check, in under 10 minutes of one GPU: ``bench/gpu_check.sh`` (vLLM rollouts against HF
``generate``, tokens/s; the DGRO update step's MFU on a Qwen2.5-0.5B-shaped model), then one short run of a
notebook at the ``gpu`` profile (DGRO Fig. 1, one seed, shortened) and what that run's training steps cost: step
time, tokens/s, MFU and the GPU's peak memory, read from the runs' own logs.

    bash bench/device_check.sh          # on a GPU node; writes outputs/device_check/ (or $OUT)

Without CUDA it stops at once, naming the torch build (:func:`gpu_check.cuda_refusal`), and writes
``device_check.json`` with the refusal, so a CPU machine tests the script up to there. Each stage has its own time
limit (:data:`LIMITS`, 9 minutes together) and the JSON is rewritten after each, so a stage cut short keeps the
others' results.

The notebook run: ``params/gpu/dgro_fig1_reward_variance.yaml`` with one seed and :data:`SHORT` (fewer steps and
held-out puzzles; nothing else changed), read by the notebook through ``DGRO_PARAMS_DIR``, trained from scratch
(no archive), executed with papermill like ``make reproduce``. Its four arms train side by side on the one GPU, as
the profile's ``workers`` say. The step figures are medians over every logged step of every run: ``step_time`` is
TRL's wall time of one optimizer step, rollouts included; tokens are the prompt and completion tokens of that
step (``num_tokens`` is TRL's running count); MFU = 6 · parameters · tokens / step_time over the device's bf16
dense peak (:data:`gpu_check.PEAK_TFLOPS`), so it counts the update's forward and backward and not the rollout's
generation: at the ``gpu`` profile's ~1M-parameter miniature it is tiny by construction, and it says how far a
launch-bound model is from the GPU's peak, not what a 7B run reaches. Peak memory is ``gpu/peak_memory_gib``,
which the trainer logs on a GPU (torch's peak allocation since the previous log, per process).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))

import gpu_check  # noqa: E402  (bench/gpu_check.py: the refusal and the peak table)

from dgro_lib.util.files import write_json  # noqa: E402

NOTEBOOK = "dgro_fig1_reward_variance"
#: the notebook run's params, over the gpu profile's file: one seed, 20 optimizer steps, 100 held-out puzzles
SHORT = {"seeds": [0], ("train", "max_steps"): 20, ("train", "eval_every"): 10, ("train", "save_steps"): 20,
         ("train", "eval_subset"): 50, ("data", "n_eval"): 100}
#: seconds per stage; together 9 minutes, inside one device call's 10
LIMITS = {"gpu_check": 270, "notebook": 270}
#: gpu_check.sh's sizes here (its defaults take up to 8 minutes alone)
GPU_CHECK_ARGS = ["--prompts", "128", "--new-tokens", "256", "--train-steps", "6"]


def write(out: Path, result: dict) -> None:
    """``out/device_check.json``, atomically: a stage killed part-way leaves the previous stages' version."""
    write_json(out / "device_check.json", result)


def short_params(root: Path) -> Path:
    """Write the notebook run's params (the gpu profile's file with :data:`SHORT`) to ``<root>/gpu/``."""
    import yaml

    raw = yaml.safe_load((REPO / "params" / "gpu" / f"{NOTEBOOK}.yaml").read_text())
    for key, value in SHORT.items():
        if isinstance(key, tuple):
            raw[key[0]][key[1]] = value
        else:
            raw[key] = value
    dest = root / "gpu" / f"{NOTEBOOK}.yaml"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(f"# params/gpu/{NOTEBOOK}.yaml, shortened by bench/device_check.py\n"
                    + yaml.safe_dump(raw, sort_keys=False))
    return dest


def n_params(model_path: str | Path) -> int:
    """Parameters of the HF model folder at ``model_path``, from its safetensors headers (no weights loaded)."""
    from safetensors import safe_open

    total = 0
    for f in sorted(Path(model_path).glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as st:
            for k in st.keys():
                n = 1
                for d in st.get_slice(k).get_shape():
                    n *= d
                total += n
    return total


def step_costs(run_dirs: list[Path], peak_tflops: float | None) -> dict:
    """Median step time, tokens per step, tokens/s, MFU and the largest peak memory over the runs' logged steps."""
    import pandas as pd

    rows = []
    for d in run_dirs:
        m = pd.read_csv(d / "metrics.csv")
        manifest = json.loads((d / "manifest.json").read_text())
        m = m[m["step_time"].notna()] if "step_time" in m else m.iloc[0:0]
        tokens = m["num_tokens"].diff().fillna(m["num_tokens"]) if "num_tokens" in m else None
        if tokens is None or m.empty:
            continue
        n = n_params(manifest["model_path"])
        for t, s, mem in zip(tokens, m["step_time"], m.get("gpu/peak_memory_gib", [None] * len(m))):
            rows.append({"run": d.name, "params": n, "tokens": t, "step_s": s, "peak_gib": mem})
    if not rows:
        return {"error": "no run logged a step (metrics.csv without step_time)"}
    df = pd.DataFrame(rows)
    df["tokens_per_s"] = df["tokens"] / df["step_s"]
    df["tflops"] = 6 * df["params"] * df["tokens"] / df["step_s"] / 1e12
    out = {"runs": int(df["run"].nunique()), "steps": len(df), "params": int(df["params"].iloc[0]),
           "step_s_median": float(df["step_s"].median()), "tokens_per_step_median": float(df["tokens"].median()),
           "tokens_per_s_median": float(df["tokens_per_s"].median()), "tflops_median": float(df["tflops"].median()),
           "peak_tflops": peak_tflops}
    out["mfu_median"] = out["tflops_median"] / peak_tflops if peak_tflops else None
    mem = pd.to_numeric(df["peak_gib"], errors="coerce")
    out["peak_memory_gib_max"] = float(mem.max()) if mem.notna().any() else None
    return out


def notebook_run(out: Path) -> Path:
    """Execute the notebook at the shortened gpu params (its runs under ``<out>/outputs/``); returns the executed
    notebook."""
    from dgro_lib.cli.reproduce import run_notebook
    from dgro_lib.config.load import PARAMS_DIR_ENV
    from dgro_lib.runs.archive import ARCHIVE_ENV

    short_params(out / "params")
    os.environ[PARAMS_DIR_ENV] = str(out / "params")
    os.environ[ARCHIVE_ENV] = "none"  # train: the check is of the training path's cost, not a restore
    return run_notebook(NOTEBOOK, "gpu", output_root=out / "outputs")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", str(REPO / "outputs" / "device_check")))
    ap.add_argument("--notebook-stage", action="store_true", help=argparse.SUPPRESS)  # stage 2's child process
    a = ap.parse_args(argv)
    out = Path(a.out)
    if a.notebook_stage:
        notebook_run(out)
        return 0
    result: dict = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "complete": False}
    refusal = gpu_check.cuda_refusal()
    if refusal:
        result["refused"] = refusal
        write(out, result)
        print(f"device_check: {refusal}", file=sys.stderr, flush=True)
        return 1
    import torch

    name = torch.cuda.get_device_name(0)
    peak = next((v for k, v in gpu_check.PEAK_TFLOPS.items() if k in name), None)
    result |= {"device": name, "torch": torch.__version__, "limits_s": LIMITS}
    write(out, result)

    # 1. bench/gpu_check.sh: rollouts (vLLM / HF tokens/s) and the update step's MFU, its JSON beside ours
    t0 = time.time()
    env = dict(os.environ, OUT=str(out), PY=sys.executable)
    try:
        p = subprocess.run(["bash", str(REPO / "bench" / "gpu_check.sh"), *GPU_CHECK_ARGS], env=env,
                           timeout=LIMITS["gpu_check"], text=True, capture_output=True)
        result["gpu_check_rc"] = p.returncode
        print(p.stdout[-4000:], p.stderr[-2000:], sep="\n", flush=True)
    except subprocess.TimeoutExpired:
        result["gpu_check_rc"] = f"timed out after {LIMITS['gpu_check']} s"
    if (out / "gpu_check.json").is_file():
        result["gpu_check"] = json.loads((out / "gpu_check.json").read_text())
    result["gpu_check_s"] = round(time.time() - t0, 1)
    write(out, result)

    # 2. one short notebook run at the gpu profile, in a child process under its own time limit
    t0 = time.time()
    try:
        p = subprocess.run([sys.executable, __file__, "--notebook-stage", "--out", str(out)],
                           timeout=LIMITS["notebook"], text=True, capture_output=True, env=dict(os.environ))
        result["notebook_rc"] = p.returncode
        print(p.stdout[-4000:], p.stderr[-4000:], sep="\n", flush=True)
    except subprocess.TimeoutExpired:
        result["notebook_rc"] = f"timed out after {LIMITS['notebook']} s"
    result["notebook_s"] = round(time.time() - t0, 1)
    runs = sorted(p.parent for p in (out / "outputs").rglob("metrics.csv"))
    result["notebook_steps"] = step_costs(runs, peak) if runs else {"error": "no run wrote metrics.csv"}
    result["complete"] = True
    write(out, result)
    print(json.dumps({k: result.get(k) for k in ("device", "gpu_check_rc", "notebook_rc", "notebook_steps")},
                     indent=1, default=str), flush=True)
    ok = result["gpu_check_rc"] == 0 and result["notebook_rc"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
