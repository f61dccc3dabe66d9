"""The scored policy is the sampled policy: scoring reproduces what `generate` sampled from."""

from __future__ import annotations

import math

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")

from transformers.generation.logits_process import (  # noqa: E402
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from collabzoo.algos import LLMPolicy, MLPPolicy, Sampling, tiny_causal_lm  # noqa: E402
from collabzoo.algos.policies.sampling import sampling_logits, token_log_probs  # noqa: E402

SETTINGS = [
    Sampling(temperature=0.6, top_p=0.6, top_k=50),  # the reference defaults
    Sampling(temperature=1.0, top_p=1.0, top_k=None),  # the raw distribution
    Sampling(temperature=0.3, top_p=1.0, top_k=None),  # temperature only
    Sampling(temperature=1.3, top_p=0.9, top_k=None),  # nucleus only
    Sampling(temperature=0.8, top_p=1.0, top_k=5),  # top-k only
    Sampling(temperature=0.7, top_p=0.95, top_k=3),  # both, top-k the tighter
    Sampling(temperature=1.0, top_p=0.3, top_k=None),  # a narrow nucleus (top_p < 1/2)
    Sampling(temperature=0.9, top_p=0.2, top_k=20),  # both, the nucleus the tighter
]


def transformers_log_probs(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """log_softmax of the logits after transformers' own warpers, in generate's order."""
    warpers = LogitsProcessorList()
    if sampling.temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(sampling.temperature))
    if sampling.top_k:
        warpers.append(TopKLogitsWarper(top_k=sampling.top_k))
    if sampling.top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p=sampling.top_p))
    return torch.log_softmax(warpers(None, logits.clone()), -1)


@pytest.mark.parametrize(
    "sampling", SETTINGS, ids=lambda s: f"T{s.temperature}-p{s.top_p}-k{s.top_k}"
)
def test_the_warp_equals_transformers_warpers(sampling: Sampling) -> None:
    generator = torch.Generator().manual_seed(0)
    for scale in (0.5, 3.0, 10.0):  # flat to sharp distributions
        logits = torch.randn(64, 300, generator=generator) * scale
        expected = transformers_log_probs(logits, sampling)
        ours = torch.log_softmax(sampling_logits(logits, sampling), -1)
        kept = torch.isfinite(expected)
        assert torch.equal(torch.isfinite(ours), kept), "the kept sets must be the same"
        assert torch.allclose(ours[kept], expected[kept], atol=1e-5, rtol=0)


@pytest.mark.parametrize("sampling", SETTINGS[4:6], ids=["k", "pk"])
def test_ties_at_the_top_k_boundary_keep_what_transformers_keeps(sampling: Sampling) -> None:
    """bf16 logits tie often: top-k then keeps every token equal to the k-th value."""
    generator = torch.Generator().manual_seed(1)
    logits = (torch.randn(64, 300, generator=generator) * 3).to(torch.bfloat16).float()
    logits[:, :8] = logits[:, :1]  # eight tokens tied with the first, in every row
    logits[:, :1] += 5.0
    logits[:, 1:8] += 3.0  # seven tied tokens straddle the top-k boundary of k = 3 and 5
    expected = transformers_log_probs(logits, sampling)
    ours = torch.log_softmax(sampling_logits(logits, sampling), -1)
    kept = torch.isfinite(expected)
    assert torch.equal(torch.isfinite(ours), kept)
    assert (kept.sum(-1) > sampling.top_k).any(), "the ties are kept beyond k"
    assert torch.allclose(ours[kept], expected[kept], atol=1e-5, rtol=0)


def test_a_nucleus_inside_a_tie_at_the_top_k_boundary_cuts_the_tied_tokens_too() -> None:
    """The fast top-k path sees only k of the tied tokens; at a tie it must take the full
    sort, or the tied tokens beyond k would escape the nucleus."""
    sampling = Sampling(temperature=1.0, top_p=0.5, top_k=2)  # the 5.0 alone holds over 0.9
    for row in ([5.0, 1.0, 1.0, 1.0, 0.0], [5.0, 1.0, 1.0, 0.0, 0.0]):  # k = 2 keeps the 1.0s
        logits = torch.tensor([row])
        expected = transformers_log_probs(logits, sampling)
        assert torch.isfinite(expected).tolist() == [[True, False, False, False, False]]
        ours = torch.log_softmax(sampling_logits(logits, sampling), -1)
        assert torch.equal(torch.isfinite(ours), torch.isfinite(expected)), row


def left_padded(policy: LLMPolicy, prompts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), policy.pad_id)
    attention = torch.zeros_like(ids)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt) :] = torch.tensor(prompt)
        attention[row, width - len(prompt) :] = 1
    return ids, attention


@pytest.mark.parametrize(
    "sampling", SETTINGS[:1] + SETTINGS[3:6], ids=["reference", "p", "k", "pk"]
)
def test_scoring_reproduces_what_generate_sampled_from(sampling: Sampling) -> None:
    """The model's generation_config asks for a repetition penalty, min-p and typical-p (as hub
    configs do): sampling must not apply them, and the sampled tokens' log-probabilities under
    the scores generate actually drew from must equal `score(..., sampling=...)`."""
    model, tokenizer = tiny_causal_lm(seed=4)
    with torch.no_grad():  # sharpen the random model so that top-k and top-p really cut
        model.get_input_embeddings().weight.mul_(3.0)
    extras = {"repetition_penalty": 1.8, "min_p": 0.3, "typical_p": 0.5, "no_repeat_ngram_size": 2}
    for name, value in extras.items():
        setattr(model.generation_config, name, value)
    policy = LLMPolicy(model, tokenizer)
    prompts = [policy.encode_prompt(t) for t in ("hello there", "a longer prompt to sample from")]
    ids, attention = left_padded(policy, prompts)
    torch.manual_seed(0)
    with torch.no_grad(), policy.plain_generation_config():
        out = model.generate(
            input_ids=ids,
            attention_mask=attention,
            output_scores=True,
            return_dict_in_generate=True,
            **policy.generation_options(
                Sampling(16, sampling.temperature, sampling.top_p, sampling.top_k)
            ),
        )
    for name, value in extras.items():  # the model's own config is back as it was
        assert getattr(model.generation_config, name) == value
    completions = []
    for row in out.sequences[:, ids.size(1) :].tolist():
        stop = next((j for j, t in enumerate(row) if t in policy.stop_ids), len(row) - 1)
        completions.append(row[: stop + 1])
    with torch.no_grad():
        scored = policy.score(prompts, completions, sampling=sampling)
        raw = policy.score(prompts, completions)
    cut = 0
    for row, completion in enumerate(completions):
        for j, token in enumerate(completion):
            drawn = torch.log_softmax(out.scores[j][row].float(), -1)
            cut += int(torch.isinf(drawn).sum()) > 0
            assert scored.log_probs[row, j].item() == pytest.approx(drawn[token].item(), abs=1e-4)
    assert scored.outside_kept == 0
    if sampling.truncates:
        assert cut > 0, "the sharpened model must make top-k / top-p cut tokens"
    assert not torch.allclose(scored.log_probs, raw.log_probs, atol=1e-2), (
        "temperature 1 without truncation is a different distribution"
    )


def test_the_entropy_is_that_of_the_sampling_distribution() -> None:
    policy = LLMPolicy(*tiny_causal_lm(seed=2))
    sampling = Sampling(temperature=0.5, top_p=0.7, top_k=10)
    prompt, completion = [10, 20, 30], [40, 41, 42]
    with torch.no_grad():
        scored = policy.score([prompt], [completion], sampling=sampling, entropy=True)
        logits = policy.model(input_ids=torch.tensor([prompt + completion])).logits[0]
    for j in range(len(completion)):
        log_p = transformers_log_probs(logits[len(prompt) - 1 + j : len(prompt) + j], sampling)[0]
        kept = torch.isfinite(log_p)
        expected = -(log_p[kept].exp() * log_p[kept]).sum().item()
        assert scored.entropy[0, j].item() == pytest.approx(expected, abs=1e-4)
        assert expected < math.log(10) + 1e-6, "at most 10 tokens are kept"


def test_a_token_the_scoring_pass_would_cut_is_kept_and_counted() -> None:
    logits = torch.tensor([[4.0, 3.0, 0.0, -1.0]]).expand(2, 4)
    sampling = Sampling(temperature=1.0, top_p=1.0, top_k=2)
    log_probs, entropy, outside = token_log_probs(
        logits, torch.tensor([3, 0]), sampling, entropy=True
    )
    assert outside.tolist() == [True, False]
    z = logits[0]
    assert log_probs[0].item() == pytest.approx((z[3] - torch.logsumexp(z[[0, 1, 3]], 0)).item())
    assert log_probs[1].item() == pytest.approx((z[0] - torch.logsumexp(z[[0, 1]], 0)).item())
    p = torch.softmax(z[:2], 0)
    assert entropy[0].item() == pytest.approx(-(p * p.log()).sum().item(), abs=1e-6)


def test_greedy_decoding_and_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="greedy decoding"):
        sampling_logits(torch.zeros(1, 5), Sampling(do_sample=False))
    with pytest.raises(ValueError, match="greedy decoding"):
        LLMPolicy(*tiny_causal_lm()).score([[1]], [[2]], sampling=Sampling(do_sample=False))
    with pytest.raises(ValueError, match="temperature must be"):
        Sampling(temperature=0.0)
    with pytest.raises(ValueError, match="top_p must be"):
        Sampling(top_p=0.0)
    with pytest.raises(ValueError, match="top_k must be"):
        Sampling(top_k=-1)
    Sampling(temperature=0.0, do_sample=False)  # greedy needs no temperature


def test_mlp_policies_sample_and_score_the_same_distribution() -> None:
    from gymnasium import spaces

    policy = MLPPolicy(spaces.Box(-1, 1, (3,)), spaces.Discrete(6), hidden=(16,), seed=0)
    with torch.no_grad():
        policy.model.logits.weight.mul_(300.0)  # a sharp policy: top-k and top-p matter
    observation = policy.encode_prompt([0.1, -0.5, 0.9])
    sampling = Sampling(temperature=0.8, top_p=0.9, top_k=3)
    with torch.no_grad():
        _, (logits,) = policy.model(torch.tensor([observation]))
    log_p = transformers_log_probs(logits, sampling)[0]
    assert torch.isinf(log_p).sum() >= 3, "top-k 3 of 6 cuts at least 3 actions"
    torch.manual_seed(0)
    actions = [c.completion_ids[0] for c in policy.generate([observation] * 600, sampling)]
    counts = torch.bincount(torch.tensor(actions), minlength=6).float() / len(actions)
    assert torch.allclose(counts, log_p.exp(), atol=0.06)
    assert (counts[torch.isinf(log_p)] == 0).all(), "actions the warp cuts are never sampled"
    seen = sorted(set(actions))
    with torch.no_grad():
        scored = policy.score([observation] * len(seen), [[a] for a in seen], sampling=sampling)
    assert scored.log_probs[:, 0].tolist() == pytest.approx(log_p[seen].tolist(), abs=1e-5)


def test_evaluation_may_keep_the_models_extras_training_may_not(tmp_path) -> None:
    """`collabzoo bench` samples hub models as the reference evaluates them, with their
    generation_config extras; a learner switches that off (and says so)."""
    import collabzoo
    from collabzoo.algos import MAGRPOConfig, MAGRPOTrainer

    model, tokenizer = tiny_causal_lm(seed=4)
    model.generation_config.repetition_penalty = 1.8
    policy = LLMPolicy(model, tokenizer, keep_generation_config=True)
    with policy.plain_generation_config():
        assert model.generation_config.repetition_penalty == 1.8
    assert policy.copy().keep_generation_config
    config = MAGRPOConfig(output_dir=str(tmp_path), tensorboard=False, progress=False)
    with pytest.warns(UserWarning, match="switched off for training"):
        MAGRPOTrainer(lambda: collabzoo.make("tinycoop"), policy, config)
    assert not policy.keep_generation_config
    with policy.plain_generation_config():
        assert model.generation_config.repetition_penalty is None
    assert model.generation_config.repetition_penalty == 1.8
