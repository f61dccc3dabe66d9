"""Loading models and tokenizers back from disk."""

from __future__ import annotations

from pathlib import Path

from tests.optional import require_module

require_module("torch", "train")

from collabzoo.algos.model_loading import load_causal_lm, tiny_causal_lm  # noqa: E402


def test_a_saved_tiny_model_reloads_with_its_byte_tokenizer(tmp_path: Path) -> None:
    model, tokenizer = tiny_causal_lm(0)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    _, reloaded = load_causal_lm(str(tmp_path))
    assert type(reloaded) is type(tokenizer)
    assert reloaded("abc")["input_ids"] == tokenizer("abc")["input_ids"]
