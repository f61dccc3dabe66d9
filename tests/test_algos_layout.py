"""The layout of `collabzoo.algos`: its public names keep importing from the package itself
whatever subpackage they live in, and no module grows past the size one reads in a sitting."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from tests.optional import require_module

require_module("torch", "train")

import collabzoo.algos as algos  # noqa: E402

HOMES = {
    "CentralCriticConfig": "collabzoo.algos.learners.central_critic",
    "CentralCriticTrainer": "collabzoo.algos.learners.central_critic",
    "CoLLMCCConfig": "collabzoo.algos.learners.central_critic",
    "CoLLMCCTrainer": "collabzoo.algos.learners.central_critic",
    "IACConfig": "collabzoo.algos.learners.iac",
    "IACTrainer": "collabzoo.algos.learners.iac",
    "IPPOConfig": "collabzoo.algos.learners.ippo",
    "IPPOTrainer": "collabzoo.algos.learners.ippo",
    "MAGRPOConfig": "collabzoo.algos.learners.magrpo",
    "MAGRPOTrainer": "collabzoo.algos.learners.magrpo",
    "MAREINFORCEConfig": "collabzoo.algos.learners.reinforce",
    "MAREINFORCETrainer": "collabzoo.algos.learners.reinforce",
    "SupervisedConfig": "collabzoo.algos.learners.supervised",
    "SupervisedTrainer": "collabzoo.algos.learners.supervised",
    "LLMPolicy": "collabzoo.algos.policies.llm",
    "MLPPolicy": "collabzoo.algos.policies.mlp",
    "mlp_team": "collabzoo.algos.policies.mlp",
    "Sampling": "collabzoo.algos.policies.sampling",
    "load_causal_lm": "collabzoo.algos.policies.model_loading",
    "load_saved_team": "collabzoo.algos.policies.model_loading",
    "lora_team": "collabzoo.algos.policies.model_loading",
    "small_causal_lm": "collabzoo.algos.policies.model_loading",
    "tiny_causal_lm": "collabzoo.algos.policies.model_loading",
    "LEARNERS": "collabzoo.algos",
}
MAX_LINES = 550


def test_every_public_name_imports_from_the_package() -> None:
    assert sorted(algos.__all__) == sorted(HOMES), "a public name without a home here, or gone"
    for name in algos.__all__:
        namespace: dict[str, object] = {}
        exec(f"from collabzoo.algos import {name}", namespace)  # the import users write
        assert namespace[name] is getattr(algos, name)


@pytest.mark.parametrize("name", sorted(HOMES))
def test_a_public_name_is_the_object_at_its_home(name: str) -> None:
    assert getattr(algos, name) is getattr(importlib.import_module(HOMES[name]), name)


def test_learners_table_names_the_exported_classes() -> None:
    for config, trainer in algos.LEARNERS.values():
        assert getattr(algos, config.__name__) is config
        assert getattr(algos, trainer.__name__) is trainer


def test_no_module_of_algos_is_over_the_size_limit() -> None:
    root = Path(algos.__file__).parent
    sizes = {p.relative_to(root): len(p.read_text().splitlines()) for p in root.rglob("*.py")}
    assert {p: n for p, n in sizes.items() if n > MAX_LINES} == {}
