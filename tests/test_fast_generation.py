"""Fast generation: one prefill per prompt, one call for a LoRA team, a cap on rows per call.

Each speed-up must leave the sampled distribution as it was: the shared prefill gives the same
samples for the same seed; a mixed-adapter batch draws its rows in another order, so it is
checked statistically, row by row, against the exact probabilities of each row's adapter.
"""

from __future__ import annotations

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")

from collabzoo.algos import LLMPolicy, Sampling, lora_team, tiny_causal_lm  # noqa: E402
from collabzoo.algos.rollout.tree import TreeRollout  # noqa: E402
from collabzoo.tasks.tinycoop.envs import TinyCoopEnv  # noqa: E402
from tests.lora_weights import seed_lora_weights  # noqa: E402

PROMPTS = ["write a word", "write a word", "write a word", "abc", "abc", "abc", "one row"]
SAMPLING = Sampling(10, temperature=1.0, top_p=1.0, top_k=None)


def forward_widths(model) -> tuple[list[tuple[int, int]], object]:
    """(rows, tokens) of every forward pass of the transformer, and the hook's handle."""
    seen: list[tuple[int, int]] = []
    body = model.get_base_model().get_decoder() if hasattr(model, "peft_config") else None
    body = body or model.get_decoder()
    handle = body.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(tuple(kwargs["input_ids"].shape)),
        with_kwargs=True,
    )
    return seen, handle


def test_one_prefill_per_prompt_gives_the_same_samples() -> None:
    policy = LLMPolicy(*tiny_causal_lm(seed=2))
    results = {}
    for share in (False, True):
        policy.share_prompts = share
        seen, handle = forward_widths(policy.model)
        torch.manual_seed(7)
        try:
            results[share] = [c.completion_ids for c in policy.generate(PROMPTS, SAMPLING)]
        finally:
            handle.remove()
        if share:  # 3 distinct prompts prefilled once, then every row from its last token
            width = max(len(policy.encode_prompt(p)) for p in PROMPTS)
            assert seen[0] == (3, width - 1)
            assert seen[1] == (7, 1)
        else:
            assert seen[0][0] == 7 and seen[0][1] > 1
    assert results[True] == results[False]
    assert len({tuple(c) for c in results[True][:3]}) == 3  # K samples, not one copied


def test_generation_batch_size_caps_rows_per_call() -> None:
    policy = LLMPolicy(*tiny_causal_lm(seed=2), generation_batch_size=3)
    calls: list[int] = []
    original = policy.model.generate

    def counted(*args, **kwargs):
        calls.append(kwargs["input_ids"].shape[0])
        return original(*args, **kwargs)

    policy.model.generate = counted
    completions = policy.generate(PROMPTS, SAMPLING)
    assert calls == [3, 3, 1]
    assert [c.prompt_ids for c in completions] == [policy.encode_prompt(p) for p in PROMPTS]
    with pytest.raises(ValueError, match="generation_batch_size"):
        LLMPolicy(*tiny_causal_lm(), generation_batch_size=0).generate(["x"], SAMPLING)


def lora_pair() -> dict[str, LLMPolicy]:
    team = lora_team(*tiny_causal_lm(seed=3), ["left", "right"])
    seed_lora_weights(team["left"].model, 0.5)  # the two adapters really differ
    return team


def chi_square(counts: torch.Tensor, probs: torch.Tensor) -> float:
    expected = probs * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


def test_a_mixed_adapter_batch_samples_each_rows_own_adapter() -> None:
    """2,000 one-token samples per adapter, all in one mixed call, against each adapter's
    exact top-5 distribution: the chi-square statistic (4 degrees of freedom) stays under
    18.5 (p = 0.001) for the row's own adapter and far above it for the other one."""
    team = lora_pair()
    sampling = Sampling(1, temperature=1.0, top_p=1.0, top_k=5)
    prompt = team["left"].encode_prompt("a shared prompt")
    rows = 2000
    torch.manual_seed(0)
    samples = team["left"].generate_ids(
        [prompt] * (2 * rows), sampling, adapters=["left"] * rows + ["right"] * rows
    )
    tokens = torch.tensor([s.completion_ids[0] for s in samples])
    exact = {}
    for name, policy in team.items():
        with torch.no_grad(), policy.active():
            logits = policy.model(input_ids=torch.tensor([prompt])).logits[0, -1]
        top = torch.topk(logits, 5)
        exact[name] = (top.indices, torch.softmax(top.values, -1))
    for half, name in enumerate(("left", "right")):
        drawn = tokens[half * rows : (half + 1) * rows]
        for other in ("left", "right"):
            indices, probs = exact[other]
            counts = torch.stack([(drawn == i).sum() for i in indices]).float()
            if other == name:
                assert counts.sum() == rows  # every draw inside its adapter's top 5
                assert chi_square(counts, probs) < 18.5
            elif counts.sum() == rows:
                assert chi_square(counts, probs) > 100


def test_a_lora_team_samples_in_one_call_per_depth() -> None:
    team = lora_pair()
    env = TinyCoopEnv()
    agents = list(env.possible_agents)
    policies = dict(zip(agents, (team["left"], team["right"]), strict=True))
    rollout = TreeRollout(TinyCoopEnv, policies, Sampling(4), num_generations=3, max_depth=1)
    torch.manual_seed(0)
    roots = rollout.build([0, 1], 0.9)
    assert rollout.generate_calls == 1
    for root in roots:
        for agent in agents:
            own = policies[agent]
            samples = root.samples[agent]
            assert len(samples) == 3
            assert all(s.prompt_ids == own.encode_prompt(root.observations[agent]) for s in samples)


@pytest.mark.slow
def test_compiled_generation_samples_what_plain_generation_samples() -> None:
    """`compile_generation` (a static cache, the decode step under `torch.compile`) is a speed
    setting only: a LoRA team's mixed-adapter batch of prompts of three lengths gives the same
    tokens as the plain path, greedy and sampled with one seed, also after the weights change
    in place (an optimizer step) without compiling again; its prompts are padded to a multiple
    of `COMPILED_PROMPT_MULTIPLE` columns."""
    from collabzoo.algos.policies.llm import COMPILED_PROMPT_MULTIPLE

    team = lora_pair()
    policy = team["left"]
    rows = [policy.encode_prompt(p) for p in PROMPTS[2:]]
    names = ["left", "right", "left", "right", "left"]
    greedy = Sampling(8, do_sample=False)

    def both(sampling: Sampling) -> tuple[list[list[int]], list[list[int]]]:
        drawn = []
        for compiled in (False, True):
            policy.compile_generation = compiled
            torch.manual_seed(5)
            drawn.append(
                [c.completion_ids for c in policy.generate_ids(rows, sampling, adapters=names)]
            )
        return drawn[0], drawn[1]

    plain, compiled = both(greedy)
    assert compiled == plain
    assert len({tuple(c) for c in plain}) > 2  # the rows and adapters really differ
    plain, compiled = both(SAMPLING)
    assert compiled == plain
    seed_lora_weights(policy.model, 1.0, seed=1)  # new weights
    before = plain
    compilations = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    plain, compiled = both(SAMPLING)
    assert compiled == plain != before
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == compilations
    seen, handle = forward_widths(policy.model)
    try:
        policy.generate_ids(rows, greedy, adapters=names)
    finally:
        handle.remove()
    assert seen[0][1] % COMPILED_PROMPT_MULTIPLE == 0 and seen[0][1] > max(map(len, rows))


def test_the_hf_compiled_backend_compiles_the_policies_generation(tmp_path) -> None:
    from collabzoo.algos import MAGRPOConfig, MAGRPOTrainer

    team = lora_pair()
    env = TinyCoopEnv()
    policies = dict(zip(env.possible_agents, (team["left"], team["right"]), strict=True))
    for backend, compiled in (("hf", False), ("hf-compiled", True)):
        config = MAGRPOConfig(
            output_dir=str(tmp_path / backend),
            generation_backend=backend,
            progress=False,
            tensorboard=False,
        )
        trainer = MAGRPOTrainer(TinyCoopEnv, policies, config)
        assert all(p.compile_generation is compiled for p in trainer.distinct)
        assert trainer.generator is None  # the policies sample themselves
        trainer.close()


def test_compiled_generation_names_a_transformers_too_old_for_its_dtypes(monkeypatch) -> None:
    """Float32 master weights computed under bf16 autocast need a static cache that keeps keys
    and values in their own dtypes: an older transformers is refused up front, by name."""
    import transformers

    model, tokenizer = tiny_causal_lm(seed=2)
    policy = LLMPolicy(model.to(torch.bfloat16), tokenizer, compile_generation=True)
    policy.keep_float32_masters()
    assert policy.compute_dtype == torch.bfloat16
    monkeypatch.setattr(transformers, "__version__", "5.23.0")
    with pytest.raises(RuntimeError, match=r"needs transformers>=5\.24.*this is 5\.23\.0"):
        policy.generate(["abc"], Sampling(2))
    policy.compute_dtype = None  # computing in the weights' own dtype needs no newer cache
    policy._check_static_cache_dtypes()
