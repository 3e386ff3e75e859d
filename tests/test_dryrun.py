"""`python -m dgro_lib.cli.reproduce --profile paper --dry-run`: every paper config validates without a GPU."""

import io

import pytest
import yaml

from dgro_lib.config import apply_overrides, find_params, load_config
from dgro_lib.cli.dryrun import KNOWN_ARCHITECTURES, Architecture, dry_run, estimate, resolve_architecture
from dgro_lib.cli.reproduce import main as reproduce_main

GiB = 1024 ** 3


def test_every_paper_config_validates_and_prints_its_table(capsys):
    assert reproduce_main(["--profile", "paper", "--dry-run"]) == 0
    out = capsys.readouterr().out
    for name in ("dgro_fig1_reward_variance.yaml", "dgro_table3_math.yaml", "dcpo_table2_main.yaml"):
        assert name in out
    assert "total_GiB" in out and "updates_per_rollout" in out
    assert "beta2 is inert" in out  # DGRO Table 5: one update per rollout batch
    assert "exceeds" not in out  # every paper config fits its GPUs by the estimate


def test_parameter_count_matches_the_published_sizes():
    assert KNOWN_ARCHITECTURES["Qwen/Qwen2.5-7B"].n_params() / 1e9 == pytest.approx(7.62, abs=0.01)
    assert KNOWN_ARCHITECTURES["Qwen/Qwen3-4B"].n_params() / 1e9 == pytest.approx(4.02, abs=0.01)
    assert KNOWN_ARCHITECTURES["Qwen/Qwen2.5-0.5B"].n_params() / 1e9 == pytest.approx(0.494, abs=0.01)


def test_zero_stages_partition_what_they_should():
    cfg = apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "paper")), {"sweep": {}})
    arch = KNOWN_ARCHITECTURES["Qwen/Qwen2.5-7B-Instruct-1M"]
    P = arch.n_params()
    e = {d: estimate(apply_overrides(cfg, {"train.distributed": d}), arch) for d in ("none", "zero2", "zero3")}
    assert e["none"]["weights_GiB"] == pytest.approx(2 * P / GiB) and e["none"]["optim_GiB"] == pytest.approx(12 * P / GiB)
    assert e["zero2"]["weights_GiB"] == pytest.approx(2 * P / GiB) and e["zero2"]["optim_GiB"] == pytest.approx(3 * P / GiB)
    assert e["zero3"]["weights_GiB"] == pytest.approx(P / 2 / GiB) and e["zero3"]["grads_GiB"] == pytest.approx(P / 2 / GiB)
    lora = estimate(apply_overrides(cfg, {"model.peft": {"r": 8}}), arch)
    assert lora["trainable_B"] < 0.05 and lora["optim_GiB"] < 0.2
    two = estimate(apply_overrides(cfg, {"train.num_iterations": 2}), arch)
    assert two["updates_per_rollout"] == 2 and not any("inert" in w for w in two["warnings"])


def test_architecture_from_a_local_config_and_clear_errors(tmp_path):
    from dgro_lib.models import EMBEDDED_PRESETS, build_embedded_tokenizer
    from dgro_lib.miniature import build_tiny_model

    tok = build_embedded_tokenizer()
    build_tiny_model(EMBEDDED_PRESETS["ci"], tokenizer=tok).save_pretrained(tmp_path / "m")
    a = resolve_architecture(str(tmp_path / "m"))
    assert a.hidden == EMBEDDED_PRESETS["ci"].hidden and a.source.endswith("config.json")
    with pytest.raises(ValueError, match="known architectures"):
        resolve_architecture("someone/unknown-model-7b")
    bad = tmp_path / "params" / "paper"
    bad.mkdir(parents=True)
    good = yaml.safe_load(find_params("dgro_fig1_reward_variance", "paper").read_text())
    (bad / "ok.yaml").write_text(yaml.safe_dump(good))
    (bad / "broken.yaml").write_text(yaml.safe_dump({**good, "train": {**good["train"], "num_processes": 3}}))
    buf = io.StringIO()
    with pytest.raises(ValueError, match="broken.yaml"):
        dry_run("paper", params_root=tmp_path / "params", out=buf)
    assert "ok.yaml" in buf.getvalue() and "FAILED broken.yaml" in buf.getvalue()


def _million_token_model(tmp_path):
    """A local config.json shaped like Qwen2.5-7B-Instruct-1M (no weights): max_position_embeddings 1,010,000."""
    from transformers import Qwen2Config

    path = tmp_path / "qwen-1m"
    Qwen2Config(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
                num_key_value_heads=4, vocab_size=152064, max_position_embeddings=1010000,
                tie_word_embeddings=False).save_pretrained(path)
    return path


def test_vllm_kv_cache_of_the_reserved_context_must_fit_the_colocate_share(tmp_path):
    """Left to the model's config, vLLM reserves the whole 1M-token context: ~53.9 GiB of KV cache for one sequence,
    where a 0.3 share of 80 GiB less the bf16 weights leaves ~9.8. The prompt + completion lengths fit."""
    path = _million_token_model(tmp_path)
    arch = resolve_architecture(str(path))
    assert arch.max_positions == 1010000
    paper = apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "paper")),
                            {"sweep": {}, "model.path": str(path)})
    unset = apply_overrides(paper, {"train.max_prompt_length": None, "eval.engine": "hf"})
    with pytest.raises(ValueError, match=r"1,010,000-token sequence .*max_position_embeddings.* needs 53\.9 GiB.*"
                                         r"train\.vllm_gpu_memory_utilization 0\.3 x train\.gpu_memory_gb 80"):
        estimate(unset, arch)
    fits = estimate(paper, arch)
    assert fits["vllm_context"] == 400 + 4096 == paper.train.max_prompt_length + paper.train.max_completion_length
    assert fits["vllm_kv_GiB"] == pytest.approx(2 * 28 * 4 * 128 * 2 * 4496 / GiB)
    assert fits["vllm_kv_GiB"] < fits["vllm_kv_room_GiB"] < 0.3 * 80
    # the dry run refuses such a file (non-zero exit through reproduce), naming the file and the setting
    root = tmp_path / "params" / "paper"
    root.mkdir(parents=True)
    data = yaml.safe_load(find_params("dgro_fig1_reward_variance", "paper").read_text())
    data["model"]["path"] = str(path)
    (root / "ok.yaml").write_text(yaml.safe_dump(data))
    del data["train"]["max_prompt_length"]
    data["eval"]["engine"] = "hf"  # the vLLM evaluation engine would refuse the unset length at load time
    (root / "no_max_length.yaml").write_text(yaml.safe_dump(data))
    buf = io.StringIO()
    with pytest.raises(ValueError, match=r"no_max_length\.yaml: .*set train\.max_prompt_length"):
        dry_run("paper", params_root=tmp_path / "params", out=buf)
    assert "FAILED ok.yaml" not in buf.getvalue() and "ok.yaml" in buf.getvalue()


def test_the_miniature_rows_print_its_sizes_not_zeros():
    """The gpu profile's miniature weighs a few MiB: its memory cells print two significant digits, not 0.0; a
    quantity the run does not hold (no reference model) prints as 0."""
    buf = io.StringIO()
    rows = dry_run("gpu", out=buf)
    fig1 = next(r for r in rows if r["file"] == "dgro_fig1_reward_variance.yaml")
    assert fig1["arch_source"].startswith("committed base mini") and 0 < fig1["weights_GiB"] < 0.05
    line = next(x for x in buf.getvalue().splitlines() if x.strip().startswith("dgro_fig1_reward_variance.yaml"))
    cells = line.split()
    assert f"{fig1['weights_GiB']:.2g}" in cells and f"{fig1['logits_GiB']:.2g}" in cells and "0.0" not in cells


def test_zero_fp32_gradients_live_layers_and_host_ram():
    """ZeRO in bf16 adds an fp32 gradient partition (4 B per parameter over the ranks); ZeRO-3 gathers up to 1e9
    parameters for a forward; the host holds the fp32 model per rank while it loads, partitioned only by ZeRO-3."""
    cfg = apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "paper")), {"sweep": {}})
    assert cfg.train.bf16 and cfg.train.num_processes == 4
    arch = KNOWN_ARCHITECTURES["Qwen/Qwen2.5-7B-Instruct-1M"]
    P, n = arch.n_params(), 4
    e = {d: estimate(apply_overrides(cfg, {"train.distributed": d}), arch) for d in ("none", "zero2", "zero3")}
    assert e["none"]["zero_fp32_grads_GiB"] == 0 and e["none"]["zero3_live_GiB"] == 0
    assert e["zero2"]["zero_fp32_grads_GiB"] == pytest.approx(4 * P / n / GiB) == e["zero3"]["zero_fp32_grads_GiB"]
    assert e["zero2"]["zero3_live_GiB"] == 0 and e["zero3"]["zero3_live_GiB"] == pytest.approx(2e9 / GiB)
    assert e["none"]["host_GiB_per_rank"] == pytest.approx(4 * P / GiB) == e["zero2"]["host_GiB_per_rank"]
    assert e["zero3"]["host_GiB_per_rank"] == pytest.approx(4 * P / n / GiB)
    assert e["none"]["host_GiB_node"] == pytest.approx(n * 4 * P / GiB)  # ~114 GiB for 7.6B on 4 ranks
    for d, r in e.items():  # every term is in the total
        parts = ("weights", "grads", "optim", "zero_fp32_grads", "zero3_live", "ref", "activations", "logits",
                 "generation")
        assert r["total_GiB"] == pytest.approx(sum(r[f"{p}_GiB"] for p in parts)), d


def test_j2_and_j4_double_each_micro_batch():
    """DCPO's J2/J4 append a second sampling of every prompt (fraction 1): each micro-batch's activations and the
    HF generation cache double against J1/J3, whose batches keep their size."""
    from dgro_lib.config import expand_sweep

    cfg = apply_overrides(load_config(find_params("dcpo_fig1_grid", "paper")), {"train.use_vllm": False})
    arch = KNOWN_ARCHITECTURES["Qwen/Qwen2.5-7B"]
    e = {c.loss.name: estimate(c, arch) for _, _, c in expand_sweep(cfg)}
    for a, b in (("j2", "j1"), ("j4", "j3")):
        assert e[a]["extra_rows"] == 1.0 and e[b]["extra_rows"] == 0
        assert e[a]["activations_GiB"] == pytest.approx(2 * e[b]["activations_GiB"])
        assert e[a]["generation_GiB"] == pytest.approx(2 * e[b]["generation_GiB"])


def test_evaluation_memory_is_checked():
    """The evaluation after training holds the model and one eval batch's KV cache (the HF sampler: a batch that
    cannot fit warns) or vLLM's share, in which one sequence must fit (else the dry run fails)."""
    paper = apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "paper")), {"sweep": {}})
    arch = KNOWN_ARCHITECTURES["Qwen/Qwen2.5-7B-Instruct-1M"]
    assert paper.eval.engine == "vllm"  # the paper files evaluate through vLLM: its fixed share of the GPU
    assert estimate(paper, arch)["eval_GiB"] == pytest.approx(0.85 * paper.train.gpu_memory_gb)
    with pytest.raises(ValueError, match="eval.engine vllm: the KV cache of one"):
        estimate(apply_overrides(paper, {"eval.max_new_tokens": 2_000_000}), arch)
    cfg = apply_overrides(paper, {"eval.engine": "hf"})
    ok = estimate(cfg, arch)
    kv = 2 * arch.layers * arch.kv_heads * arch.head_dim * 2
    want = 2 * arch.n_params() + kv * (cfg.train.max_prompt_length + cfg.eval.max_new_tokens) * cfg.eval.batch_size
    assert ok["eval_GiB"] == pytest.approx(want / GiB) and not any("evaluation" in w for w in ok["warnings"])
    big = estimate(apply_overrides(cfg, {"eval.batch_size": 4096}), arch)
    assert any("eval.batch_size = 4096" in w for w in big["warnings"])
