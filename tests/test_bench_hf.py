"""hf: teams: Hugging Face models through the learners' LLMPolicy, one for all agents or one
per agent, and a checkpoint saved by a trainer benchmarked as it is (tiny random models; no
download)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")

import collabzoo  # noqa: E402
from collabzoo.algos import LLMPolicy, MAGRPOConfig, MAGRPOTrainer, Sampling  # noqa: E402
from collabzoo.algos.policies.model_loading import load_causal_lm, tiny_causal_lm  # noqa: E402
from collabzoo.bench import read_results  # noqa: E402
from collabzoo.bench.rescore import rescore  # noqa: E402
from collabzoo.cli import main  # noqa: E402
from tests.lora_weights import seed_lora_weights  # noqa: E402

GREEDY = Sampling(max_new_tokens=4, do_sample=False)


def bench(tmp_path: Path, team: str, *extra: str) -> int:
    return main(
        [
            "bench",
            "--env",
            "tinycoop",
            "--split",
            "train",
            "--team",
            team,
            "--greedy",
            "--max-new-tokens",
            "4",
            "--output",
            str(tmp_path),
            "--no-progress",
            *extra,
        ]
    )


def first_observations(document: dict) -> list[dict[str, str]]:
    env = collabzoo.make("tinycoop")
    seen = []
    for episode in document["episodes"]:
        observations, _ = env.reset(
            seed=episode["seed"], options={"task": episode["task"], "split": episode["split"]}
        )
        seen.append(observations)
    return seen


def answers_of(document: dict, agent: str) -> list[tuple[str, int]]:
    return [
        (g["text"], g["tokens"])
        for e in document["episodes"]
        for g in e["turns"][0]["generations"]
        if g["agent"] == agent
    ]


def test_one_model_for_every_agent_through_llm_policy(tmp_path: Path) -> None:
    assert bench(tmp_path, "hf:tiny") == 0
    (path,) = tmp_path.glob("*.json")
    document = read_results(path)
    reference = LLMPolicy(*tiny_causal_lm(0))
    for agent in ("alpha", "beta"):
        prompts = [o[agent] for o in first_observations(document)]
        expected = [(c.text, len(c.completion_ids)) for c in reference.generate(prompts, GREEDY)]
        assert answers_of(document, agent) == expected
    assert all(0 < tokens <= 4 for a in ("alpha", "beta") for _, tokens in answers_of(document, a))
    assert sum(e["cost"] for e in document["episodes"]) == sum(
        tokens for a in ("alpha", "beta") for _, tokens in answers_of(document, a)
    )
    team = document["team"]
    assert team["distinct_models"] == 1 and team["members"]["alpha"]["name"] == "tiny"
    assert team["members"]["alpha"]["device"] in ("cpu", "cuda")
    assert document["sampling"]["greedy"] is True and document["sampling"]["top_k"] == 50
    assert rescore(path).ok  # a model team's file re-scores without the model


@pytest.mark.parametrize("layout", ["separate", "shared"])
def test_a_trainer_checkpoint_is_benchmarked_as_saved(tmp_path: Path, layout: str) -> None:
    """`trainer.save(path)` writes one save_pretrained folder per distinct policy, named after
    its agents; `hf:path` gives each agent its own policy back."""
    if layout == "separate":
        models = {"alpha": LLMPolicy(*tiny_causal_lm(1)), "beta": LLMPolicy(*tiny_causal_lm(2))}
    else:
        shared = LLMPolicy(*tiny_causal_lm(1))
        models = {"alpha": shared, "beta": shared}
    config = MAGRPOConfig(output_dir=str(tmp_path / "run"), tensorboard=False, progress=False)
    trainer = MAGRPOTrainer(lambda: collabzoo.make("tinycoop"), models, config)
    saved = trainer.save(tmp_path / "run" / "final")
    folders = sorted(p.name for p in saved.iterdir())
    assert folders == (["alpha", "beta"] if layout == "separate" else ["alpha+beta"])

    assert bench(tmp_path / "out", f"hf:{saved}") == 0
    (path,) = (tmp_path / "out").glob("*.json")
    document = read_results(path)
    observations = first_observations(document)
    for agent, policy in models.items():
        prompts = [o[agent] for o in observations]
        expected = [(c.text, len(c.completion_ids)) for c in policy.generate(prompts, GREEDY)]
        assert answers_of(document, agent) == expected
        member = document["team"]["members"][agent]
        assert member["checkpoint"] == str(saved)
        assert Path(member["name"]).name == ("alpha+beta" if layout == "shared" else agent)
    assert document["team"]["distinct_models"] == (2 if layout == "separate" else 1)


def test_one_model_per_agent(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    model, tokenizer = tiny_causal_lm(5)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    assert bench(tmp_path / "out", f"hf:tiny,{folder}") == 0
    (path,) = (tmp_path / "out").glob("*.json")
    document = read_results(path)
    assert document["team"]["distinct_models"] == 2
    prompts = [o["beta"] for o in first_observations(document)]
    expected = LLMPolicy(model, tokenizer).generate(prompts, GREEDY)
    assert answers_of(document, "beta") == [(c.text, len(c.completion_ids)) for c in expected]


def test_models_that_do_not_load_are_clear_errors(tmp_path: Path, capsys) -> None:
    assert bench(tmp_path, f"hf:{tmp_path / 'no-such-model'}") == 2
    assert "cannot load Hugging Face model" in capsys.readouterr().err
    partial = tmp_path / "ckpt"
    model, tokenizer = tiny_causal_lm(0)
    model.save_pretrained(partial / "alpha")
    tokenizer.save_pretrained(partial / "alpha")
    assert bench(tmp_path, f"hf:{partial}") == 2
    err = capsys.readouterr().err
    assert "holds policies for alpha, but the env's agents are alpha, beta" in err


def test_a_lora_team_checkpoint_loads_each_agents_adapter(tmp_path: Path) -> None:
    """The default `collabzoo train` team for hub models: one base, one LoRA adapter per agent.
    The saved adapters name their base (here a local folder), and each agent gets its own."""
    from collabzoo.algos import lora_team

    base_folder = tmp_path / "base"
    model, tokenizer = tiny_causal_lm(3)
    model.save_pretrained(base_folder)
    tokenizer.save_pretrained(base_folder)
    models = lora_team(*load_causal_lm(str(base_folder)), ["alpha", "beta"])
    seed_lora_weights(models["alpha"].model, 1.0)  # trained: unlike the base and each other
    config = MAGRPOConfig(output_dir=str(tmp_path / "run"), tensorboard=False, progress=False)
    trainer = MAGRPOTrainer(lambda: collabzoo.make("tinycoop"), models, config)
    saved = trainer.save(tmp_path / "run" / "final")

    assert bench(tmp_path / "out", f"hf:{saved}") == 0
    (path,) = (tmp_path / "out").glob("*.json")
    document = read_results(path)
    observations = first_observations(document)
    for agent, policy in models.items():
        prompts = [o[agent] for o in observations]
        expected = [(c.text, len(c.completion_ids)) for c in policy.generate(prompts, GREEDY)]
        assert answers_of(document, agent) == expected
        member = document["team"]["members"][agent]
        assert member["adapter"] == agent and member["base_model"] == str(base_folder)


def test_chat_template_options_reach_hf_models(tmp_path: Path, capsys) -> None:
    """`--chat-template-kwargs` (Qwen3's {"enable_thinking": false}) is passed to the chat
    template of every hf: model and recorded with the run; bad JSON is a clear error."""
    folder = tmp_path / "model"
    model, tokenizer = tiny_causal_lm(5)
    tokenizer.chat_template = (
        "{% if enable_thinking is defined and not enable_thinking %}/no_think {% endif %}"
        "{{ messages[0]['content'] }} =>"
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    options = '{"enable_thinking": false}'
    assert bench(tmp_path / "out", f"hf:{folder}", "--chat-template-kwargs", options) == 0
    (path,) = (tmp_path / "out").glob("*.json")
    document = read_results(path)
    member = document["team"]["members"]["alpha"]
    assert member["chat_template_kwargs"] == {"enable_thinking": False}
    quiet = LLMPolicy(*load_causal_lm(str(folder)), chat_template_kwargs={"enable_thinking": False})
    prompts = [o["alpha"] for o in first_observations(document)]
    assert quiet.tokenizer.decode(quiet.encode_prompt(prompts[0])).startswith("/no_think ")
    expected = [(c.text, len(c.completion_ids)) for c in quiet.generate(prompts, GREEDY)]
    assert answers_of(document, "alpha") == expected

    assert bench(tmp_path / "bad", f"hf:{folder}", "--chat-template-kwargs", "{oops") == 2
    assert "--chat-template-kwargs must be JSON" in capsys.readouterr().err
    assert bench(tmp_path / "bad", f"hf:{folder}", "--chat-template-kwargs", "[1]") == 2
    assert "must be a JSON object" in capsys.readouterr().err


def test_a_vllm_team_without_vllm_says_how_to_install_it(tmp_path: Path, capsys) -> None:
    """Here vLLM is not installed (its tests run in .ci/vllm-tests' own environment)."""
    from tests.conftest import VLLM_INSTALLED

    if VLLM_INSTALLED:
        pytest.skip("vLLM is installed here: tests/vllm cover vllm: teams")
    assert bench(tmp_path, "vllm:tiny") != 0
    assert "collabzoo[vllm]" in capsys.readouterr().err
