"""Loading models and tokenizers back from disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.optional import require_module

require_module("torch", "train")

from collabzoo.algos.policies.model_loading import load_causal_lm, tiny_causal_lm  # noqa: E402


def test_a_saved_tiny_model_reloads_with_its_byte_tokenizer(tmp_path: Path) -> None:
    model, tokenizer = tiny_causal_lm(0)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    _, reloaded = load_causal_lm(str(tmp_path))
    assert type(reloaded) is type(tokenizer)
    assert reloaded("abc")["input_ids"] == tokenizer("abc")["input_ids"]


def test_a_checkpoint_without_a_folder_for_the_runs_agents_says_what_to_bench(tmp_path) -> None:
    """The single protocol plays one agent (`writer`); a two-agent team's checkpoint has no
    folder for it: the error names the saved policies and what to pass instead."""
    from collabzoo.algos.policies.model_loading import team_folders

    for name in ("summary", "elaboration"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
    with pytest.raises(ValueError) as error:
        team_folders(tmp_path, ["writer"])
    message = str(error.value)
    assert "elaboration, summary" in message and "writer" in message
    assert f"hf:{tmp_path / 'elaboration'}" in message
    assert team_folders(tmp_path / "summary", ["writer"]) == {}  # a model folder of its own
