"""Memory-lean scoring: the LM head only at completion tokens, in checkpointed chunks.

The lean paths (`head_scoring`) must give the log-probabilities, entropies, prompt states and
gradients of scoring through `forward` with logits at every position (the way before, and still
the way for a model whose logits are not head(body(x)); `through_forward` forces it), on both
prompt layouts, for full models and LoRA adapters, with gradient
checkpointing too; and they must really skip the logits they promise to skip.
"""

from __future__ import annotations

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")

from collabzoo.algos import LLMPolicy, Sampling, lora_team, tiny_causal_lm  # noqa: E402
from tests.lora_weights import seed_lora_weights  # noqa: E402
from tests.tolerance import assert_close_to_scale  # noqa: E402

SAMPLING = Sampling(8, temperature=0.7, top_p=0.9, top_k=20)
PROMPTS = [[10, 20, 30, 40], [10, 20, 30, 40], [5, 6, 7], [5, 6, 7], [10, 20, 30, 40], [9]]
COMPLETIONS = [[41, 42, 43], [44], [45, 46, 47, 48, 49], [], [1, 2], [50, 51]]
REAL_TOKENS = sum(len(c) for c in COMPLETIONS)


def make_policy(lora: bool, seed: int = 4) -> LLMPolicy:
    model, tokenizer = tiny_causal_lm(seed)
    if lora:
        policy = lora_team(model, tokenizer, ["first", "second"])["second"]
        seed_lora_weights(policy.model, 0.05, adapter="second")  # a real effect
        return policy
    return LLMPolicy(model, tokenizer)


def through_forward(policy: LLMPolicy, forward: bool = True) -> None:
    """Score `policy` the way a model without a separable LM head is scored (or, with
    forward=False, the usual way again)."""
    if forward:
        policy.body_and_head = lambda: None
    else:
        vars(policy).pop("body_and_head", None)


def score_and_grads(
    policy: LLMPolicy, *, lean: bool, share: bool, entropy: bool | str = True
) -> tuple[object, dict[str, torch.Tensor]]:
    through_forward(policy, not lean)
    policy.share_prompts = share
    policy.model.zero_grad(set_to_none=True)
    scored = policy.score(
        PROMPTS, COMPLETIONS, sampling=SAMPLING, entropy=entropy, prompt_hidden=True
    )
    loss = scored.log_probs.sum() + scored.prompt_hidden.sum()
    if entropy is True:
        loss = loss + 0.5 * scored.entropy.sum()
    loss.backward()
    grads = {n: p.grad.clone() for n, p in policy.model.named_parameters() if p.grad is not None}
    return scored, grads


def assert_same(got: tuple, expected: tuple, *, rel: float = 1e-5, grad_rel: float = 2e-5) -> None:
    scored, grads = got
    reference, reference_grads = expected
    assert scored.mask.tolist() == reference.mask.tolist()
    assert_close_to_scale(scored.log_probs, reference.log_probs, rel=rel)
    assert_close_to_scale(scored.entropy, reference.entropy, rel=rel)
    assert_close_to_scale(scored.prompt_hidden, reference.prompt_hidden, rel=rel)
    assert scored.outside_kept == reference.outside_kept
    assert sorted(grads) == sorted(reference_grads)
    for name, grad in grads.items():
        assert_close_to_scale(grad, reference_grads[name], rel=grad_rel)


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
@pytest.mark.parametrize("share", [True, False], ids=["shared-prompts", "whole-rows"])
def test_lean_scoring_equals_scoring_through_forward(lora: bool, share: bool) -> None:
    policy = make_policy(lora)
    expected = score_and_grads(policy, lean=False, share=False)
    assert expected[0].outside_kept > 0  # the truncation path is exercised, not only softmax
    got = score_and_grads(policy, lean=True, share=share)
    assert_same(got, expected)
    if lora:  # the adapter's weights got gradients, the frozen base none
        assert got[1] and all("lora_" in name and ".second" in name for name in got[1])


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_gradient_checkpointing_keeps_shared_prompts_and_gradients(lora: bool) -> None:
    policy = make_policy(lora)
    expected = score_and_grads(policy, lean=True, share=True)
    policy.enable_gradient_checkpointing()
    prompt_rows: list[int] = []
    body = policy.body_and_head()[0]
    hook = body.register_forward_pre_hook(
        lambda module, args, kwargs: prompt_rows.append(kwargs["input_ids"].shape[0]),
        with_kwargs=True,
    )
    try:
        with policy.mode(train=True):  # checkpointing runs in train mode only
            policy.model.train()
            got = score_and_grads(policy, lean=True, share=True)
    finally:
        hook.remove()
    # the unique prompts ran once (3 rows), then the completions on their states (6 rows)
    assert prompt_rows == [3, 6]
    assert_same(got, expected)


def test_reentrant_checkpointing_falls_back_to_whole_rows_with_right_gradients() -> None:
    """A re-entrant checkpoint would cut the prompt's states off the graph: whole rows then."""
    policy = make_policy(False)
    expected = score_and_grads(policy, lean=True, share=True)
    policy.model.gradient_checkpointing_enable(
        gradient_checkpointing_kwargs={"use_reentrant": True}
    )
    policy.model.train()
    calls: list[int] = []
    policy._lean_joint = lambda *args: calls.append(1) or LLMPolicy._lean_joint(policy, *args)
    got = score_and_grads(policy, lean=True, share=True)
    assert calls == [1]
    assert_same(got, expected)


def head_rows(policy: LLMPolicy) -> tuple[list[int], object]:
    rows: list[int] = []
    head = policy.body_and_head()[1]
    return rows, head.register_forward_hook(lambda m, args, out: rows.append(args[0].shape[0]))


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
@pytest.mark.parametrize("share", [True, False], ids=["shared-prompts", "whole-rows"])
def test_the_head_runs_only_at_completion_tokens_in_chunks(lora: bool, share: bool) -> None:
    policy = make_policy(lora)
    policy.share_prompts, policy.logit_chunk_tokens = share, 4
    rows, hook = head_rows(policy)
    try:
        scored = policy.score(PROMPTS, COMPLETIONS, sampling=SAMPLING)
        assert REAL_TOKENS == 13 and rows == [4, 4, 4, 1]  # the real tokens, 4 at a time
        rows.clear()
        scored.log_probs.sum().backward()  # backward recomputes each chunk's logits
        assert sorted(rows) == [1, 4, 4, 4]
        rows.clear()
        with torch.no_grad():
            policy.prompt_states(PROMPTS)  # a critic's read: no logits at all
        assert rows == []
    finally:
        hook.remove()


def test_entropy_for_logging_has_no_graph_and_the_same_values() -> None:
    policy = make_policy(False)
    with_grad = policy.score(PROMPTS, COMPLETIONS, sampling=SAMPLING, entropy=True)
    logged = policy.score(PROMPTS, COMPLETIONS, sampling=SAMPLING, entropy="log")
    plain = policy.score(PROMPTS, COMPLETIONS, sampling=SAMPLING)
    assert with_grad.entropy.requires_grad and not logged.entropy.requires_grad
    assert plain.entropy is None
    assert_close_to_scale(logged.entropy, with_grad.entropy)
    through_forward(policy)  # the path through forward gives the same logged values
    forward = policy.score(PROMPTS, COMPLETIONS, sampling=SAMPLING, entropy="log")
    assert not forward.entropy.requires_grad
    assert_close_to_scale(forward.entropy, with_grad.entropy)


def test_bf16_autocast_scores_like_forward() -> None:
    """With a bf16 compute dtype, lean and forward scoring see the same bf16 logits."""
    model, tokenizer = tiny_causal_lm(4)
    policy = LLMPolicy(model.to(torch.bfloat16), tokenizer)
    policy.keep_float32_masters()
    assert policy.compute_dtype == torch.bfloat16
    expected = score_and_grads(policy, lean=False, share=False)
    got = score_and_grads(policy, lean=True, share=True)
    assert_close_to_scale(got[0].log_probs, expected[0].log_probs, rel=2e-2)
    for name, grad in got[1].items():
        assert_close_to_scale(grad, expected[1][name], rel=5e-2)
