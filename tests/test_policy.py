"""The LLM policy: batched log-probabilities equal a naive per-sequence computation."""

from __future__ import annotations

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")

from collabzoo.algos import LLMPolicy, Sampling, tiny_causal_lm  # noqa: E402
from tests.tolerance import assert_close_to_scale  # noqa: E402


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
        assert value == pytest.approx(
            naive_log_prob(policy, prompt, completion), rel=1e-5, abs=1e-6
        )
    assert batched[-1].item() == 0.0, "an empty completion has log-probability 0"


def test_padding_never_changes_a_log_prob(policy: LLMPolicy) -> None:
    prompt, completion = CASES[0]
    with torch.no_grad():
        alone = policy.sequence_log_probs([prompt], [completion])
        padded = policy.sequence_log_probs([prompt, list(range(3, 60))], [completion, [7] * 30])
    assert_close_to_scale(padded[:1], alone)
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
            policy._lean_joint = whole_rows  # type: ignore[method-assign]
        scored = policy.score(prompts, completions, entropy=True, prompt_hidden=True)
        loss = scored.log_probs.sum() + scored.entropy.sum() + scored.prompt_hidden.sum()
        loss.backward()
        grads = torch.cat([p.grad.flatten() for p in policy.model.parameters()])
        results[share] = (scored, grads)
    shared, whole = results[True][0], results[False][0]
    assert shared.mask.tolist() == whole.mask.tolist()
    assert_close_to_scale(shared.log_probs, whole.log_probs)
    assert_close_to_scale(shared.entropy, whole.entropy)
    assert_close_to_scale(shared.prompt_hidden, whole.prompt_hidden)
    assert_close_to_scale(results[True][1], results[False][1])  # gradients of size ~170
    policy = LLMPolicy(*tiny_causal_lm(seed=5))
    with torch.no_grad():
        states = policy.prompt_states(prompts)  # the prompt-only pass a critic uses
    assert_close_to_scale(states, whole.prompt_hidden)
    with torch.no_grad():
        values = policy.sequence_log_probs(prompts, completions).tolist()
    for prompt, completion, value in zip(prompts, completions, values, strict=True):
        assert value == pytest.approx(
            naive_log_prob(policy, prompt, completion), rel=1e-5, abs=1e-6
        )


def test_scoring_rejects_mismatched_or_empty_inputs(policy: LLMPolicy) -> None:
    with pytest.raises(ValueError, match="one each expected"):
        policy.score([[1, 2]], [[3], [4]])
    with pytest.raises(ValueError, match="at least one token"):
        policy.score([[]], [[3]])


# ----- stop tokens ------------------------------------------------------------------------------
def test_every_stop_token_of_the_generation_config_ends_a_completion() -> None:
    """Qwen instruct models stop on <|im_end|> and <|endoftext|>: every id of the model's
    generation_config ends a completion, the stop token included in the scored action."""
    model, tokenizer = tiny_causal_lm(seed=6)
    greedy = Sampling(max_new_tokens=8, do_sample=False)
    first = LLMPolicy(model, tokenizer).generate(["two stops"], greedy)[0].completion_ids
    second_stop = next(t for t in first[1:] if t != tokenizer.eos_token_id)
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, second_stop]
    policy = LLMPolicy(model, tokenizer)
    assert policy.stop_ids == [tokenizer.eos_token_id, second_stop]
    completion = policy.generate(["two stops"], greedy)[0]
    end = first.index(second_stop)
    assert completion.completion_ids == first[: end + 1], "cut at the second stop id, kept"
    with torch.no_grad():
        scored = policy.score([completion.prompt_ids], [completion.completion_ids])
    assert scored.mask[0].tolist() == [True] * (end + 1), "the stop token is scored"
    assert scored.log_probs[0, end].item() < 0


# ----- long prompts -----------------------------------------------------------------------------
TEMPLATE = (
    "<|user|>\n{{ messages[0]['content'] }}\n"
    "{% if enable_thinking is defined and not enable_thinking %}<|no-think|>\n{% endif %}"
    "<|assistant|>\n"
)


def templated_policy(max_prompt_tokens: int, **options) -> LLMPolicy:
    model, tokenizer = tiny_causal_lm(seed=1)
    tokenizer.chat_template = TEMPLATE
    return LLMPolicy(model, tokenizer, max_prompt_tokens=max_prompt_tokens, **options)


def test_a_long_prompt_is_cut_inside_the_template_with_a_visible_mark() -> None:
    from collabzoo.algos.policies.prompt_budget import TRUNCATION_MARK

    policy = templated_policy(120)
    text = "OLDEST " + "filler words " * 40 + "the newest line"
    assert len(policy.encode_prompt("short")) < 120 and policy.truncated_prompts == 0
    ids = policy.encode_prompt(text)
    decoded = policy.tokenizer.decode(ids)
    assert len(ids) <= 120 and policy.truncated_prompts == 1
    assert decoded.startswith("<|user|>\n" + TRUNCATION_MARK), "the header survives the cut"
    assert decoded.endswith("the newest line\n<|assistant|>"), "the newest text is kept"
    assert "OLDEST" not in decoded
    assert len(ids) >= 120 - 2, "the budget is used, not wasted"


def test_the_parts_of_a_joint_state_share_the_budget() -> None:
    """A centralized critic's joint state: a long first observation must not push the second
    agent's out; each part keeps its newest tokens, the labels between them stay."""
    policy = templated_policy(160)
    first = "alpha saw " + "a very long history " * 30 + "ALPHA-NOW"
    second = "beta saw little BETA-NOW"
    state = f"[alpha] {first}\n\n[beta] {second}"
    decoded = policy.tokenizer.decode(policy.encode_prompt(state, parts=[first, second]))
    assert "[alpha]" in decoded and "ALPHA-NOW" in decoded
    assert f"[beta] {second}" in decoded, "the short part is kept whole"
    assert len(policy.encode_prompt(state, parts=[first, second])) <= 160
    # without parts the same state is cut as one text: the first agent's label goes
    whole = policy.tokenizer.decode(policy.encode_prompt(state))
    assert "[alpha]" not in whole and "BETA-NOW" in whole


def test_share_budget_gives_short_parts_all_they_need() -> None:
    from collabzoo.algos.policies.prompt_budget import share_budget, split_parts

    assert share_budget([10, 100, 100], 90) == [10, 40, 40]
    assert share_budget([5, 6], 100) == [5, 6]
    assert share_budget([50, 50, 50], 10) == [3, 3, 4]
    assert sum(share_budget([7, 300, 41, 2], 97)) == 97
    assert split_parts("[a] x\n[b] y", ["x", "y"]) == [
        ("[a] ", False),
        ("x", True),
        ("\n[b] ", False),
        ("y", True),
    ]
    assert split_parts("no parts here", ["missing"]) == [("no parts here", True)]


def test_a_budget_smaller_than_the_template_is_a_clear_error() -> None:
    policy = templated_policy(6)
    with pytest.raises(ValueError, match="raise max_prompt_tokens"):
        policy.encode_prompt("a prompt longer than six tokens")


def test_chat_template_options_reach_the_template() -> None:
    plain = templated_policy(200)
    quiet = templated_policy(200, chat_template_kwargs={"enable_thinking": False})
    assert "<|no-think|>" not in plain.tokenizer.decode(plain.encode_prompt("hi"))
    assert "<|no-think|>" in quiet.tokenizer.decode(quiet.encode_prompt("hi"))
    assert quiet.copy().chat_template_kwargs == {"enable_thinking": False}


# ----- precision --------------------------------------------------------------------------------
def test_float32_masters_compute_in_the_loaded_precision() -> None:
    model, tokenizer = tiny_causal_lm(seed=0)
    policy = LLMPolicy(model.to(torch.bfloat16), tokenizer)
    assert policy.keep_float32_masters() == len(list(model.parameters()))
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert policy.compute_dtype == torch.bfloat16
    with policy.compute():
        logits = model(input_ids=torch.tensor([[5, 6, 7]])).logits
    assert logits.dtype == torch.bfloat16, "the forward pass runs under bf16 autocast"
    with torch.no_grad():
        scored = policy.score([[5, 6, 7]], [[8, 9]])
    assert scored.log_probs.dtype == torch.float32, "log-softmax is taken in float32"
    assert policy.keep_float32_masters() == 0, "idempotent"


def test_a_raw_prompt_is_tokenized_without_the_chat_template() -> None:
    """The games' later turns reach the model as raw text (the reference trainers' quirk): an
    observation marked `chat_template = False` skips the template, also when cut to fit and
    beside an equal plain text in one batch."""
    from collabzoo.algos.policies.llm import encode_rows
    from collabzoo.envs.prompt_form import RawPrompt

    policy = templated_policy(60)
    plain, raw = "the newest line", RawPrompt("the newest line")
    templated_ids, raw_ids = policy.encode_prompt(plain), policy.encode_prompt(raw)
    assert policy.tokenizer.decode(templated_ids).startswith("<|user|>")
    assert raw_ids == policy.tokenizer(plain, add_special_tokens=False)["input_ids"]
    assert encode_rows([policy, policy], [plain, raw]) == [templated_ids, raw_ids]
    long_raw = RawPrompt("OLDEST " + "filler words " * 40 + "the newest line")
    cut = policy.tokenizer.decode(policy.encode_prompt(long_raw))
    assert "<|user|>" not in cut and cut.endswith("the newest line") and "OLDEST" not in cut
