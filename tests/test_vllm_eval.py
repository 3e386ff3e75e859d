"""Evaluation through vLLM's offline engine (``eval.engine: vllm``), on the CPU: a stand-in engine that keeps vLLM's
``LLM.generate`` contract (prompts as ``{"prompt_token_ids"}``, ``SamplingParams``, ``outputs[i].outputs[j]`` with
``token_ids`` and ``finish_reason``) and decodes with the project's own sampler. What is tested is our side: the
prompts, the sampling settings, the EOS union, the order of the completions, the truncation flags and that the
evaluation's numbers equal the HF path's for the same completions. vLLM itself runs only on a GPU node."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from real_tokenizers import build_tiny_model, build_tokenizer

from dgro_lib.config import ConfigError, apply_overrides, check_runnable_here, find_params, load_config
from dgro_lib.data import kk
from dgro_lib.evaluate import evaluate_greedy, evaluate_sampled, evaluate_under_config, protocol_for_config
from dgro_lib.evaluate.vllm_engine import VLLMEvalModel
from dgro_lib.models import load_model
from dgro_lib.models.sampling import eos_ids, sample


class FakeSamplingParams(SimpleNamespace):
    """vLLM's SamplingParams fields, kept as given."""


class FakeLLM:
    """vLLM's ``LLM`` contract over an HF model and the project's sampler (greedy is exact; sampling is the
    sampler's own draw), recording what it was asked."""

    instances: list["FakeLLM"] = []

    def __init__(self, *, model, **kwargs):
        self.model, self.tokenizer = load_model(model)
        self.kwargs, self.calls = kwargs, []
        FakeLLM.instances.append(self)

    def generate(self, prompts, params, use_tqdm=True):
        self.calls.append((prompts, params))
        ids = sample(self.model, self.tokenizer, [p["prompt_token_ids"] for p in prompts], n=params.n,
                     greedy=params.temperature == 0, temperature=params.temperature or 1.0, top_p=params.top_p,
                     max_new_tokens=params.max_tokens, seed=params.seed, eos_token_id=params.stop_token_ids)
        stop = set(params.stop_token_ids)
        out = []
        for i in range(len(prompts)):
            comps = []
            for x in ids[i * params.n:(i + 1) * params.n]:
                ended = bool(x) and x[-1] in stop
                comps.append(SimpleNamespace(token_ids=tuple(x), finish_reason="stop" if ended else "length",
                                             stop_reason=x[-1] if ended else None))
            out.append(SimpleNamespace(outputs=comps))
        return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    tok = build_tokenizer("qwen2.5")
    path = build_tiny_model(tok, tmp_path_factory.mktemp("tiny") / "qwen")
    model, tok = load_model(str(path))
    return str(path), model, tok


@pytest.fixture(scope="module")
def records():
    return kk.generate(3, 5, seed=11)


def engine(path, **kw):
    return VLLMEvalModel(path, max_model_len=kw.pop("max_model_len", 4096), llm_factory=FakeLLM,
                         sampling_params=FakeSamplingParams, **kw)


def test_greedy_through_the_engine_equals_the_hf_path(tiny, records):
    path, model, tok = tiny
    hf = evaluate_greedy(model, tok, records, template="chat", max_new_tokens=6, batch_size=2)
    eng = engine(path)
    ev = evaluate_greedy(eng, tok, records, template="chat", max_new_tokens=6, batch_size=2)
    for key in ("completions", "lengths", "correct", "well_formatted", "accuracy", "truncated"):
        assert ev[key] == hf[key], key
    prompts, params = eng.llm.calls[-1]
    assert len(eng.llm.calls) == 1 and len(prompts) == len(records)  # one engine call: vLLM batches by itself
    want = [tok(kk.format_prompt(r, template="chat", tokenizer=tok), add_special_tokens=False)["input_ids"]
            for r in records]
    assert [p["prompt_token_ids"] for p in prompts] == want
    assert (params.n, params.temperature, params.top_p, params.max_tokens, params.seed) == (1, 0.0, 1.0, 6, None)
    assert params.stop_token_ids == eos_ids(tok, model) and params.skip_special_tokens is False


def test_sampling_settings_and_order(tiny, records):
    path, model, tok = tiny
    eng = engine(path)
    ev = evaluate_sampled(eng, tok, records, n=3, temperature=0.7, top_p=0.9, seed=5, template="chat",
                          max_new_tokens=4)
    _, params = eng.llm.calls[-1]
    assert (params.n, params.temperature, params.top_p, params.max_tokens, params.seed) == (3, 0.7, 0.9, 4, 5)
    assert ev["n"] == 3 * len(records) and len(ev["per_prompt"]) == len(records)


def test_eos_and_truncation_flags_from_finish_reason(tiny, records):
    """A completion that a stop id ended counts its EOS (appended where vLLM left it out of token_ids) and is not
    truncated; one that hit max_tokens is truncated."""
    path, _, tok = tiny
    eng = engine(path)
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    answer = tok(" (1) x", add_special_tokens=False)["input_ids"]
    scripted = [SimpleNamespace(outputs=[SimpleNamespace(token_ids=tuple(answer), finish_reason="stop",
                                                         stop_reason=eos)]),
                SimpleNamespace(outputs=[SimpleNamespace(token_ids=tuple(answer + [eos]), finish_reason="stop",
                                                         stop_reason=eos)]),
                SimpleNamespace(outputs=[SimpleNamespace(token_ids=tuple(answer), finish_reason="length",
                                                         stop_reason=None)])]
    eng.llm.generate = lambda prompts, params, use_tqdm=True: scripted
    ids, cut = eng.generate_ids([[1], [2], [3]], n=1, greedy=True, temperature=0.0, top_p=1.0, max_new_tokens=8,
                                seed=None, stop_token_ids=[eos])
    assert ids == [answer + [eos], answer + [eos], answer] and cut == [False, False, True]


def test_a_prompt_longer_than_the_reserved_context_is_refused(tiny, records):
    path, _, tok = tiny
    eng = engine(path, max_model_len=64)
    with pytest.raises(ValueError, match="train.max_prompt_length"):
        evaluate_greedy(eng, tok, records, template="chat", max_new_tokens=8)


def test_load_eval_model_starts_the_engine_with_the_protocols_context(tiny, monkeypatch):
    from dgro_lib.runs import data_sources
    from dgro_lib.evaluate import vllm_engine

    path, _, _ = tiny
    seen = {}

    class Spy(VLLMEvalModel):
        def __init__(self, p, **kw):
            seen.update(kw, path=p)
            super().__init__(p, llm_factory=FakeLLM, sampling_params=FakeSamplingParams, **kw)

    monkeypatch.setattr(vllm_engine, "VLLMEvalModel", Spy)
    cfg = apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "paper")),
                          {"sweep": {}, "eval.engine": "vllm"})
    model, tok = data_sources.load_eval_model(cfg, path)
    assert isinstance(model, Spy) and seen["path"] == path and seen["dtype"] == "bfloat16"
    assert seen["max_model_len"] == cfg.train.max_prompt_length + cfg.eval.max_new_tokens
    assert model.llm.kwargs["max_model_len"] == seen["max_model_len"] and model.llm.kwargs["tensor_parallel_size"] == 1
    data_sources.close_eval_model(model)
    assert model.llm is None


def test_config_checks_for_the_engine():
    paper = apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "paper")), {"sweep": {}})
    with pytest.raises(ConfigError, match="eval.engine: 'sglang'"):
        apply_overrides(paper, {"eval.engine": "sglang"})
    with pytest.raises(ConfigError, match="only multi-process runs"):
        apply_overrides(paper, {"eval.engine": "vllm", "train.num_processes": 1, "train.distributed": "none"})
    with pytest.raises(ConfigError, match="train.max_prompt_length is unset"):
        apply_overrides(paper, {"eval.engine": "vllm", "train.max_prompt_length": None})
    vllm = apply_overrides(paper, {"eval.engine": "vllm"})
    with pytest.raises(ConfigError, match="eval.engine: vllm needs a CUDA GPU"):
        check_runnable_here(apply_overrides(vllm, {"train.use_vllm": False, "train.distributed": "none"}), cuda=False)
    with pytest.raises(ConfigError, match="eval.engine: vllm, but the vllm package is not installed"):
        check_runnable_here(apply_overrides(vllm, {"train.use_vllm": False}), cuda=True, gpus=8,
                            bf16_supported=True, vllm_installed=False)


def test_the_protocol_names_the_engine_only_when_it_is_vllm():
    paper = apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "paper")),
                            {"sweep": {}, "eval.engine": "hf"})
    assert "engine" not in protocol_for_config(paper, 10)  # the stored evaluations of hf protocols stay found
    vllm = protocol_for_config(apply_overrides(paper, {"eval.engine": "vllm"}), 10)
    assert vllm["engine"] == "vllm" and {k: v for k, v in vllm.items() if k != "engine"} == protocol_for_config(paper, 10)


def test_under_config_through_the_engine(tiny, records):
    """evaluate_under_config (what every evaluation outside the trainer calls) takes the engine as it takes a model."""
    path, model, tok = tiny
    cfg = apply_overrides(load_config(find_params("dgro_fig1_reward_variance", "paper")),
                          {"sweep": {}, "data.template": "chat", "eval.max_new_tokens": 5})
    a = evaluate_under_config(model, tok, records, cfg)
    b = evaluate_under_config(engine(path), tok, records, cfg)
    assert a["correct"] == b["correct"] and a["completions"] == b["completions"]
