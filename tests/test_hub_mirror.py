"""The local mirror of the Hub data sets ($DGRO_HUB_MIRROR): every registered math data set written in its own record
format reads back, through the same loader and field mapping as the Hub, to the problems and answers written; K&K
reads back through load_kk_hub; a set mirror that lacks a data set is an error naming it, never a silent fall back
to the Hub."""

import pytest

from dgro_lib.data import kk
from dgro_lib.data.hub_mirror import math_hub_record, write_kk_mirror, write_math_mirror
from dgro_lib.data.kk import KK_HUB_ID
from dgro_lib.data.math import MATH_DATASETS, load_math
from dgro_lib.data.math.generate import KINDS, generate_math
from dgro_lib.data.math.records import CHOICE_LETTERS
from dgro_lib.util.paths import HUB_MIRROR_ENV, hub_mirror_path


@pytest.mark.parametrize("name", list(MATH_DATASETS))
def test_every_math_data_set_reads_back_what_was_written(tmp_path, monkeypatch, name):
    (path,) = write_math_mirror(tmp_path, [name], n=5, seed=3)
    spec = MATH_DATASETS[name]
    folder = tmp_path / spec.hub_id / spec.config if spec.config else tmp_path / spec.hub_id
    assert path == folder / f"{spec.split}.jsonl"  # where a snapshot of the Hub repository keeps that split
    monkeypatch.setenv(HUB_MIRROR_ENV, str(tmp_path))
    got = load_math(name)
    kinds = ("integer",) if name == "gsm8k" else KINDS
    written = generate_math(5, seed=3 * 100 + list(MATH_DATASETS).index(name), kinds=kinds)
    assert len(got) == 5 and all(r["source"] == name for r in got)
    for g, w in zip(got, written):
        if spec.record_post is None:
            assert (g["problem"], g["answer"]) == (w["problem"], w["answer"])
        else:  # multiple choice: the question leads, and the gold letter's option is the answer written
            assert g["problem"].startswith(w["problem"]) and g["answer"] in CHOICE_LETTERS
            assert f"({g['answer']}) {w['answer']}" in g["problem"]


def test_math_records_have_the_data_sets_own_shapes():
    dapo = math_hub_record("dapo17k", "What is 2+2?", "4")
    assert dapo["prompt"][0]["role"] == "user" and "What is 2+2?" in dapo["prompt"][0]["content"]
    assert dapo["prompt"][0]["content"] != "What is 2+2?"  # DAPO's instruction text around it
    assert dapo["reward_model"] == {"ground_truth": "4"}
    assert math_hub_record("gsm8k", "q", "1200")["answer"].endswith("#### 1200")
    assert math_hub_record("olympiadbench", "q", "x+1")["final_answer"] == ["$x+1$"]
    assert math_hub_record("orz", "q", "7") == [{"value": "q"}, {"ground_truth": {"value": "7"}}]
    with pytest.raises(ValueError, match="3 incorrect answers"):
        math_hub_record("gpqa_diamond", "q", "7", distractors=["1", "2"])
    with pytest.raises(ValueError, match="differ"):
        math_hub_record("mmlu_pro", "q", "7", distractors=["7", "2"])


def test_kk_reads_back_through_load_kk_hub(tmp_path, monkeypatch):
    base = write_kk_mirror(tmp_path, people=[3, 4], n_train=5, n_test=3, seed=1)
    assert base == tmp_path / KK_HUB_ID and (base / "test" / "people3_num3.jsonl").is_file()
    monkeypatch.setenv(HUB_MIRROR_ENV, str(tmp_path))
    test3 = kk.load_kk_hub(subset="test", split="3ppl")
    assert test3 == kk.generate(3, 3, seed=1 * 1000 + 500 + 3)
    assert len(kk.load_kk_hub(subset="train", split=4, limit=2)) == 2
    train = {r["quiz"] for r in kk.load_kk_hub(subset="train", split=3)}
    assert not train & {r["quiz"] for r in test3}  # the two splits come from different seeds
    with pytest.raises(FileNotFoundError, match=r"people=\[5\]"):
        kk.load_kk_hub(subset="test", split=5)
    with pytest.raises(ValueError, match="2ppl"):
        kk.load_kk_hub(subset="test", split="three")


def test_a_set_mirror_is_never_passed_over(tmp_path, monkeypatch):
    monkeypatch.delenv(HUB_MIRROR_ENV, raising=False)
    assert hub_mirror_path("openai/gsm8k", "main") is None
    monkeypatch.setenv(HUB_MIRROR_ENV, str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError, match="is not a directory"):
        load_math("gsm8k")
    monkeypatch.setenv(HUB_MIRROR_ENV, str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"'openai/gsm8k' \(config 'main'\)"):
        load_math("gsm8k")
    with pytest.raises(FileNotFoundError, match="K-and-K/knights-and-knaves"):
        kk.load_kk_hub(subset="test", split=3)
