"""The LLM policy: batched log-probabilities equal a naive per-sequence computation."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the learners need the train extra")

from collabzoo.algos import LLMPolicy, Sampling, tiny_causal_lm  # noqa: E402


@pytest.fixture(scope="module")
def policy() -> LLMPolicy:
    return LLMPolicy(*tiny_causal_lm(seed=3))


def naive_log_prob(policy: LLMPolicy, prompt: list[int], completion: list[int]) -> float:
    """One unpadded sequence, a Python loop over its completion tokens."""
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = policy.model(input_ids=ids).logits[0]
    total = 0.0
    for j, token in enumerate(completion):
        position = len(prompt) - 1 + j
        total += torch.log_softmax(logits[position].double(), -1)[token].item()
    return total


CASES = [
    ([10, 20, 30], [40, 41]),
    ([5], [6, 7, 8, 9, 1]),
    ([11, 12, 13, 14, 15, 16, 17], [18]),
    ([100, 101], []),
]


def test_batched_log_probs_equal_the_naive_computation(policy: LLMPolicy) -> None:
    with torch.no_grad():
        batched = policy.sequence_log_probs([c[0] for c in CASES], [c[1] for c in CASES])
    for (prompt, completion), value in zip(CASES, batched.tolist(), strict=True):
        assert value == pytest.approx(naive_log_prob(policy, prompt, completion), abs=1e-4)
    assert batched[-1].item() == 0.0, "an empty completion has log-probability 0"


def test_padding_never_changes_a_log_prob(policy: LLMPolicy) -> None:
    prompt, completion = CASES[0]
    with torch.no_grad():
        alone = policy.sequence_log_probs([prompt], [completion])
        padded = policy.sequence_log_probs([prompt, list(range(3, 60))], [completion, [7] * 30])
    assert alone[0].item() == pytest.approx(padded[0].item(), abs=1e-5)
    log_probs, mask = policy.token_log_probs([prompt, [5]], [completion, [6, 7, 8, 9]])
    assert mask.tolist() == [[True, True, False, False], [True, True, True, True]]
    assert log_probs[0, 2:].abs().sum().item() == 0.0


def test_the_last_completion_token_is_scored(policy: LLMPolicy) -> None:
    prompt = [10, 20, 30]
    with torch.no_grad():
        a, b = policy.sequence_log_probs([prompt, prompt], [[40, 41], [40, 200]]).tolist()
        first = policy.sequence_log_probs([prompt], [[40]]).item()
    assert a != b, "changing only the last token must change the log-probability"
    assert a < first and b < first


def test_generation_is_batched_left_padded_and_scorable(policy: LLMPolicy) -> None:
    torch.manual_seed(0)
    prompts = ["short", "a much longer prompt than the first one"]
    completions = policy.generate(
        prompts, Sampling(max_new_tokens=6, temperature=1.0, top_p=1.0, top_k=None)
    )
    assert [c.prompt_ids for c in completions] == [policy.encode_prompt(p) for p in prompts]
    for c in completions:
        assert 1 <= len(c.completion_ids) <= 6
        assert policy.eos_id not in c.completion_ids[:-1], "nothing is kept after eos"
        assert c.text == policy.decode(c.completion_ids)
    greedy = Sampling(max_new_tokens=5, do_sample=False)
    batched = policy.generate(prompts, greedy)
    single = [policy.generate([p], greedy)[0] for p in prompts]
    assert [c.completion_ids for c in batched] == [c.completion_ids for c in single], (
        "left padding must not change what a prompt generates"
    )


def test_shared_prompt_scoring_equals_whole_rows_values_and_gradients() -> None:
    """Samples of one prompt share a prompt pass; log-probs, entropies, the prompt's last hidden
    state and the gradients must equal scoring every row whole."""
    prompts = [[10, 20, 30], [10, 20, 30], [5, 6], [10, 20, 30], [5, 6], [7]]
    completions = [[40, 41, 42], [43], [44, 45], [], [1], [9, 9, 9, 9]]
    results = {}
    for share in (True, False):
        policy = LLMPolicy(*tiny_causal_lm(seed=5), share_prompts=share)
        if share:  # the shared path must really run, not fall back to whole rows

            def whole_rows(*args: object) -> None:
                raise AssertionError("fell back to scoring whole rows")

            policy._score_joint = whole_rows  # type: ignore[method-assign]
        scored = policy.score(prompts, completions, entropy=True, prompt_hidden=True)
        loss = scored.log_probs.sum() + scored.entropy.sum() + scored.prompt_hidden.sum()
        loss.backward()
        grads = torch.cat([p.grad.flatten() for p in policy.model.parameters()])
        results[share] = (scored, grads)
    shared, whole = results[True][0], results[False][0]
    assert shared.mask.tolist() == whole.mask.tolist()
    assert torch.allclose(shared.log_probs, whole.log_probs, atol=1e-5)
    assert torch.allclose(shared.entropy, whole.entropy, atol=1e-5)
    assert torch.allclose(shared.prompt_hidden, whole.prompt_hidden, atol=1e-5)
    assert torch.allclose(results[True][1], results[False][1], atol=1e-5)
    policy = LLMPolicy(*tiny_causal_lm(seed=5))
    with torch.no_grad():
        states = policy.prompt_states(prompts)  # the prompt-only pass a critic uses
    assert torch.allclose(states, whole.prompt_hidden, atol=1e-5)
    with torch.no_grad():
        values = policy.sequence_log_probs(prompts, completions).tolist()
    for prompt, completion, value in zip(prompts, completions, values, strict=True):
        assert value == pytest.approx(naive_log_prob(policy, prompt, completion), abs=1e-4)


def test_scoring_rejects_mismatched_or_empty_inputs(policy: LLMPolicy) -> None:
    with pytest.raises(ValueError, match="one each expected"):
        policy.score([[1, 2]], [[3], [4]])
    with pytest.raises(ValueError, match="at least one token"):
        policy.score([[]], [[3]])
