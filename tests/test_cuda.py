"""The CUDA suite (`pytest -m cuda`): the learners' GPU paths on a real GPU.

Placement, bf16 autocast over float32 masters, memory-lean scoring (values and gradients
against a float32 full-logits reference, both prompt layouts, with and without LoRA), gradient
checkpointing, mixed-adapter generation, exact checkpoint/resume, and one MAGRPO, one IPPO and
one CC update on a Qwen2.5-0.5B-shaped LoRA team in bf16.

Without CUDA the whole module skips and says so: the one skip allowed under CI=true, since CI
machines have no GPU. `COLLABZOO_CUDA_SUITE_DEVICE=cpu` runs the same checks on the CPU, to
check the suite itself where no GPU is at hand.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import os
import re
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")

DEVICE = os.environ.get("COLLABZOO_CUDA_SUITE_DEVICE", "cuda")
if DEVICE.startswith("cuda") and not torch.cuda.is_available():
    pytest.skip(
        "no CUDA device here: the CUDA suite runs on a machine with a GPU "
        "(COLLABZOO_CUDA_SUITE_DEVICE=cpu runs its checks on the CPU)",
        allow_module_level=True,
    )
if DEVICE.startswith("cuda"):  # exact resume needs deterministic cuBLAS; set before its first use
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

from gymnasium import spaces  # noqa: E402
from pettingzoo import ParallelEnv  # noqa: E402

from collabzoo.algos import (  # noqa: E402
    CentralCriticConfig,
    CentralCriticTrainer,
    IACConfig,
    IACTrainer,
    IPPOConfig,
    IPPOTrainer,
    LLMPolicy,
    MAGRPOConfig,
    MAGRPOTrainer,
    Sampling,
    lora_team,
    tiny_causal_lm,
)
from collabzoo.algos.policies.model_loading import QWEN25_VOCAB, shaped_causal_lm  # noqa: E402
from tests.lora_weights import seed_lora_weights  # noqa: E402
from tests.test_lean_scoring import (  # noqa: E402
    COMPLETIONS,
    PROMPTS,
    SAMPLING,
    assert_same,
    make_policy,
    score_and_grads,
    through_forward,
)
from tests.test_learners import team  # noqa: E402
from tests.test_resume_every_learner import (  # noqa: E402
    actor_critic,
    assert_same_run,
    lora,
    straight_and_resumed,
    tree,
)
from tests.tolerance import assert_close_to_scale  # noqa: E402

pytestmark = pytest.mark.cuda
ROOT = Path(__file__).resolve().parent.parent


def on_device(policy: LLMPolicy) -> LLMPolicy:
    policy.model.to(DEVICE)
    return policy


def device_type(tensor_or_policy: Any) -> str:
    device = getattr(tensor_or_policy, "device", None)
    return torch.device(device).type


# ----- placement and precision --------------------------------------------------------------------
def test_placement_puts_every_actor_and_critic_on_the_gpu(tmp_path) -> None:
    trainer = IACTrainer(
        lambda: TwoTurnEvenIds(),
        team(("a", "b")),
        IACConfig(output_dir=str(tmp_path), device=DEVICE, **SMALL_AC),
    )
    for name, policy in trainer.policies.items():
        assert device_type(policy) == torch.device(DEVICE).type, name
    for name, critic in trainer.critics.items():
        for parameter in critic.parameters():
            assert parameter.device.type == torch.device(DEVICE).type, name
    trainer.close()


def test_bf16_with_float32_masters_takes_steps_bf16_weights_would_lose() -> None:
    """A step of lr 5e-6 on weights of size ~1 is below bf16's resolution (2^-8): the float32
    masters take it, computed under bf16 autocast on the GPU."""
    model, tokenizer = tiny_causal_lm(4)
    policy = on_device(LLMPolicy(model.to(torch.bfloat16), tokenizer))
    assert policy.keep_float32_masters() > 0
    assert policy.compute_dtype == torch.bfloat16
    assert all(p.dtype == torch.float32 for p in policy.trainable_parameters())
    with policy.compute():
        logits = policy.model(input_ids=torch.tensor([PROMPTS[0]], device=DEVICE)).logits
    assert logits.dtype == torch.bfloat16  # the matmuls ran in bf16
    before = [p.detach().clone() for p in policy.trainable_parameters()]
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=5e-6)
    policy.score(PROMPTS, COMPLETIONS, sampling=SAMPLING).log_probs.sum().backward()
    optimizer.step()
    moved = [p.detach() for p in policy.trainable_parameters()]
    assert all(not torch.equal(a, b) for a, b in zip(before, moved, strict=True))
    pairs = zip(before, moved, strict=True)
    kept = sum(int((a.bfloat16() == b.bfloat16()).sum()) for a, b in pairs)
    total = sum(a.numel() for a in before)
    assert kept > 0.9 * total  # in bf16 almost every one of these steps would have vanished


# ----- lean scoring -------------------------------------------------------------------------------
@pytest.mark.parametrize("lora_adapter", [False, True], ids=["full", "lora"])
@pytest.mark.parametrize("share", [True, False], ids=["shared-prompts", "whole-rows"])
def test_lean_scoring_on_the_gpu_equals_a_float32_full_logits_reference(
    lora_adapter: bool, share: bool
) -> None:
    torch.manual_seed(0)  # the same LoRA start for both copies
    reference_policy = make_policy(lora_adapter)  # float32, on the CPU, through forward
    expected = score_and_grads(reference_policy, lean=False, share=False)
    torch.manual_seed(0)
    policy = on_device(make_policy(lora_adapter))
    scored, grads = score_and_grads(policy, lean=True, share=share)
    assert scored.log_probs.device.type == torch.device(DEVICE).type
    got = (moved_to_cpu(scored), {n: g.cpu() for n, g in grads.items()})
    assert_same(got, expected, rel=1e-4, grad_rel=1e-4)


def moved_to_cpu(scored: Any) -> Any:
    scored = copy.copy(scored)
    for name in ("log_probs", "mask", "entropy", "prompt_hidden"):
        value = getattr(scored, name)
        if value is not None:
            setattr(scored, name, value.detach().cpu())
    return scored


@pytest.mark.parametrize("lora_adapter", [False, True], ids=["full", "lora"])
def test_bf16_lean_scoring_at_the_real_vocabulary_tracks_float32(lora_adapter: bool) -> None:
    """Two layers of the Qwen2.5-0.5B shape (its 151,936-token head, chunked), bf16 weights
    under autocast against the same weights in float32 through forward: bf16's rounding
    only."""
    model = shaped_causal_lm("qwen2.5-0.5b", num_layers=2, dtype=torch.float32, seed=3)
    tokenizer = tiny_causal_lm(0)[1]  # ids only: scoring never decodes
    reference = LLMPolicy(model, tokenizer)
    if lora_adapter:
        reference = lora_team(model, tokenizer, ["x", "y"])["y"]
        seed_lora_weights(reference.model, 0.02, adapter="y")
    on_device(reference)
    fast = reference.alike(copy.deepcopy(reference.model).to(torch.bfloat16), reference.adapter)
    fast.keep_float32_masters()
    assert fast.compute_dtype == torch.bfloat16
    prompts = [[(37 * i + 11 * j) % QWEN25_VOCAB for j in range(40)] for i in range(3)] * 2
    completions = [[(101 * i + 7 * j) % QWEN25_VOCAB for j in range(5 + i)] for i in range(6)]
    results = []
    for policy, lean in ((reference, False), (fast, True)):
        through_forward(policy, not lean)
        policy.share_prompts = lean
        policy.model.zero_grad(set_to_none=True)
        scored = policy.score(prompts, completions, sampling=SAMPLING, prompt_hidden=True)
        scored.log_probs.sum().backward()
        named = policy.model.named_parameters()
        grads = {n: p.grad.float() for n, p in named if p.grad is not None}
        results.append((scored, grads))
    (expected, expected_grads), (got, got_grads) = results
    assert got.mask.tolist() == expected.mask.tolist()
    assert_close_to_scale(got.log_probs.float(), expected.log_probs, rel=3e-2)
    assert sorted(got_grads) == sorted(expected_grads)
    for name, grad in got_grads.items():
        reference_grad = expected_grads[name].flatten()
        cosine = torch.nn.functional.cosine_similarity(grad.flatten(), reference_grad, dim=0)
        assert cosine > 0.99, f"{name}: cosine {float(cosine):.4f} to the float32 gradient"


@pytest.mark.parametrize("lora_adapter", [False, True], ids=["full", "lora"])
def test_gradient_checkpointing_on_the_gpu_keeps_values_and_gradients(lora_adapter: bool) -> None:
    policy = on_device(make_policy(lora_adapter))
    expected = score_and_grads(policy, lean=True, share=True)
    policy.enable_gradient_checkpointing()
    with policy.mode(train=True):
        got = score_and_grads(policy, lean=True, share=True)
    assert_same(got, expected)


# ----- generation ---------------------------------------------------------------------------------
def test_a_mixed_adapter_batch_on_the_gpu_equals_one_call_per_adapter() -> None:
    """Greedy decoding: both adapters' rows in one peft mixed-adapter call give each row what
    its own adapter gives alone."""
    model, tokenizer = tiny_causal_lm(5)
    pair = lora_team(model, tokenizer, ["left", "right"])
    seed_lora_weights(model, 0.3)
    on_device(pair["left"])
    greedy = Sampling(12, do_sample=False)
    prompts = [pair["left"].encode_prompt(t) for t in ("one shared prompt", "another one")]
    rows = prompts * 2
    names = ["left", "left", "right", "right"]
    mixed = pair["left"].generate_ids(rows, greedy, adapters=names)
    alone = pair["left"].generate_ids(prompts, greedy) + pair["right"].generate_ids(prompts, greedy)
    assert [c.completion_ids for c in mixed] == [c.completion_ids for c in alone]
    assert alone[0].completion_ids != alone[2].completion_ids  # the adapters really differ


@pytest.mark.parametrize("team_kind", ["lora", "separate"])
def test_compiled_generation_on_the_gpu_draws_what_plain_generation_draws(team_kind: str) -> None:
    """`generation_backend="hf-compiled"` (on CUDA a CUDA-graph decode step): greedy tokens of a
    bf16 team equal plain `generate`'s, for a LoRA pair's mixed-adapter batch and for a model
    whose float32 masters compute under bf16 autocast (transformers >= 5.24; an older one is
    refused by name, which the test accepts as that version's answer)."""
    import transformers
    from packaging.version import Version

    from collabzoo.algos.policies.llm import STATIC_CACHE_MIXED_DTYPES

    model, tokenizer = tiny_causal_lm(6)
    model.to(torch.bfloat16)
    if team_kind == "lora":
        pair = lora_team(model, tokenizer, ["left", "right"])
        seed_lora_weights(model, 0.3)
        policy, names = pair["left"], ["left", "right", "left", "right"]
    else:
        policy, names = LLMPolicy(model, tokenizer), None
    on_device(policy)
    policy.keep_float32_masters()
    greedy = Sampling(12, do_sample=False)
    rows = [policy.encode_prompt(t) for t in ("one prompt", "a longer second prompt")] * 2
    plain = [c.completion_ids for c in policy.generate_ids(rows, greedy, adapters=names)]
    policy.compile_generation = True
    old = Version(transformers.__version__) < Version(STATIC_CACHE_MIXED_DTYPES)
    if team_kind == "separate" and old:
        with pytest.raises(RuntimeError, match="needs transformers"):
            policy.generate_ids(rows, greedy, adapters=names)
        return
    for _ in range(2):  # the second call replays the compiled step
        compiled = [c.completion_ids for c in policy.generate_ids(rows, greedy, adapters=names)]
        assert compiled == plain


# ----- checkpoint and resume ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("trainer_class", "config", "make_team"),
    [
        (MAGRPOTrainer, tree(device=DEVICE), None),
        (MAGRPOTrainer, tree(device=DEVICE), lora),
        (IACTrainer, actor_critic(device=DEVICE), None),
    ],
    ids=["magrpo", "magrpo-lora", "iac"],
)
def test_resume_on_the_gpu_ends_with_the_same_state(
    trainer_class, config, make_team, tmp_path
) -> None:
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        whole, resumed = straight_and_resumed(trainer_class, config, tmp_path, make_team)
    finally:
        torch.use_deterministic_algorithms(False)
    assert device_type(next(iter(resumed.policies.values()))) == torch.device(DEVICE).type
    assert_same_run(whole, resumed)


# ----- one update of each learner family at the Qwen2.5-0.5B shape --------------------------------
EVEN = re.compile(r"t(\d+)")


class TwoTurnEvenIds(ParallelEnv):
    """Two agents, two turns over word-id prompts; the team earns the share of even ids in both
    answers (dense, so every update has advantages). `state()` is both observations."""

    metadata: ClassVar[dict[str, Any]] = {"name": "two_turn_even_ids_v0"}
    possible_agents: ClassVar[list[str]] = ["a", "b"]

    def __init__(self) -> None:
        self.agents: list[str] = []
        self._space = spaces.Text(max_length=1 << 16)
        self.turn = 0
        self.prompt = ""

    def observation_space(self, agent):
        return self._space

    def action_space(self, agent):
        return self._space

    def observations(self) -> dict[str, str]:
        return {a: f"{self.prompt} t{2 * self.turn + i}" for i, a in enumerate(self.agents)}

    def state(self) -> str:
        return " ".join(self.observations().values())

    def reset(self, seed=None, options=None):
        self.agents, self.turn = list(self.possible_agents), 0
        self.prompt = " ".join(f"t{(seed or 0) * 7919 + 13 * j}" for j in range(24))
        return self.observations(), {a: {} for a in self.agents}

    def step(self, actions):
        ids = [int(m) for text in actions.values() for m in EVEN.findall(text)]
        reward = sum(1 for i in ids if i % 2 == 0) / max(1, len(ids))
        self.turn += 1
        done = self.turn >= 2
        agents = list(self.agents)
        if done:
            self.agents = []
        return (
            self.observations() if not done else dict.fromkeys(agents, ""),
            dict.fromkeys(agents, reward),
            dict.fromkeys(agents, done),
            dict.fromkeys(agents, False),
            {a: {} for a in agents},
        )


SMALL_AC = dict(
    rollout_buffer_size=2,
    num_generations=2,
    max_new_tokens=4,
    max_updates=1,
    tensorboard=False,
    progress=False,
    save_steps=0,
    num_turns=2,
)


@functools.cache
def vocabulary_tokenizer() -> Any:
    """gpu_scale's word-level tokenizer over the whole Qwen2.5 vocabulary: every sampled id
    decodes."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from gpu_scale import word_tokenizer
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return word_tokenizer(QWEN25_VOCAB)


@pytest.fixture
def qwen_team() -> dict[str, LLMPolicy]:
    """A fresh bf16 Qwen2.5-0.5B-shaped base with one LoRA adapter per agent."""
    model = shaped_causal_lm("qwen2.5-0.5b", dtype=torch.bfloat16, seed=0, device=DEVICE)
    tokenizer = vocabulary_tokenizer()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return lora_team(model, tokenizer, ["a", "b"])


def adapters(policies: dict[str, LLMPolicy]) -> dict[str, torch.Tensor]:
    policy = next(iter(policies.values()))
    return {n: p.detach().clone() for n, p in policy.model.named_parameters() if "lora_" in n}


@pytest.mark.parametrize(
    ("trainer_class", "config"),
    [
        (
            MAGRPOTrainer,
            MAGRPOConfig(
                agent_learning_rate=1e-3,
                **SMALL_AC,
            ),
        ),
        (
            IPPOTrainer,
            IPPOConfig(
                use_separate_critic=False,
                actor_learning_rate=1e-3,
                critic_learning_rate=1e-3,
                ppo_epochs=2,
                **SMALL_AC,
            ),
        ),
        (
            CentralCriticTrainer,
            CentralCriticConfig(actor_learning_rate=1e-3, critic_learning_rate=1e-3, **SMALL_AC),
        ),
    ],
    ids=["magrpo", "ippo", "cc"],
)
def test_one_update_of_a_qwen_0_5b_lora_team_in_bf16(
    trainer_class, config, qwen_team, tmp_path
) -> None:
    config = dataclasses.replace(
        config,
        output_dir=str(tmp_path),
        device=DEVICE,
        dtype="bfloat16",
        gradient_checkpointing=True,
    )
    if DEVICE.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    before = adapters(qwen_team)
    trainer = trainer_class(TwoTurnEvenIds, dict(qwen_team), config)
    last = trainer.train()
    after = adapters(qwen_team)
    changed = {n for n in before if not torch.equal(before[n], after[n])}
    assert any(".a." in n for n in changed) and any(".b." in n for n in changed)
    assert all(after[n].dtype == torch.float32 for n in after)  # masters
    assert all(torch.isfinite(v).all() for v in after.values())
    assert all(v == v for v in last.values() if isinstance(v, float))  # no NaN logged
    if hasattr(trainer, "critics"):
        critic_parameters = [p for c in trainer.critics.values() for p in c.parameters()]
        assert critic_parameters and all(
            p.device.type == torch.device(DEVICE).type for p in critic_parameters
        )
    if DEVICE.startswith("cuda"):  # one bf16 base (~1 GiB), adapters, heads, short rows
        assert torch.cuda.max_memory_allocated() < 8 * 2**30
    trainer.close()
