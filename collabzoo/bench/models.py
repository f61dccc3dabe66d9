"""What a team is made of: text models that turn prompts into answers and count their tokens.

Three kinds share one small interface (`TextModel.generate`): scripted policies from the
package (here), Hugging Face models through the learners' `LLMPolicy` (`hf_model`), and any
OpenAI-compatible chat endpoint (`openai_model`). Protocols only ever call `generate`, so a
protocol works with every kind, and a new kind is one class.

The names every kind and the team layer share (`ModelOptions`, `TeamError`, `CallSeeds`) live
here too, below both, so the bench's modules import each other without a cycle.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from collabzoo.envs.single import combined_answer, split_combined_prompt
from collabzoo.joint_sections import split_tagged_prompt, tagged_answer

_SEED_MODULUS = 2**31 - 1
_PIECE = re.compile(r"\w+|[^\w\s]")
SCRIPTED_TOKENS = "pieces: runs of letters/digits/underscore and single punctuation marks"
"""How a scripted answer's Cost is counted: it has no tokenizer, so `count_pieces` stands in
(about one BPE token per piece for commands and code, a little under one for prose)."""


def count_pieces(text: str) -> int:
    """Scripted answers' token count: runs of word characters and single punctuation marks."""
    return len(_PIECE.findall(text))


@dataclass(frozen=True)
class Sampling:
    """Generation settings for every model of a run (recorded in the results file).

    The defaults are the reference's (learners.md): 256 new tokens, temperature 0.6, top-p 0.6,
    top-k 50. `top_k=None` leaves it to the model (hosted chat APIs reject top_k)."""

    max_new_tokens: int = 256
    temperature: float = 0.6
    top_p: float = 0.6
    top_k: int | None = 50
    greedy: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Generation:
    """One generated answer and what it cost."""

    text: str
    tokens: int
    finish: str | None = None
    """Why generation stopped where the model says ("stop", "length"), else None."""


class TextModel(Protocol):
    """Anything that answers prompts: `generate` gets one seed per prompt for reproducible
    sampling (models that cannot use it ignore it)."""

    kind: str
    concurrent: bool
    """True when `generate` may be called from several threads at once."""

    def generate(
        self, prompts: Sequence[str], sampling: Sampling, seeds: Sequence[int]
    ) -> list[Generation]: ...

    def describe(self) -> dict[str, Any]: ...


class ScriptedModel:
    """A scripted text policy (observation in, answer out) used as a model.

    With `plays_every_role`, it also reads the `single` protocol's combined prompt (and the
    `joint` protocol's tagged one): each
    role's section is answered by the policy as that role's observation, and the answers are
    joined in the combined format, so the package's scripted teams play `single` as one model
    doing every part. Without it, the policy gets every prompt as the protocol wrote it."""

    kind = "scripted"
    concurrent = True

    def __init__(
        self, name: str, policy: Callable[[str], str], *, plays_every_role: bool = False
    ) -> None:
        self.name = name
        self.policy = policy
        self.plays_every_role = plays_every_role

    def generate(
        self, prompts: Sequence[str], sampling: Sampling, seeds: Sequence[int]
    ) -> list[Generation]:
        generations = []
        for prompt, seed in zip(prompts, seeds, strict=True):
            roles = split_combined_prompt(prompt) if self.plays_every_role else {}
            tagged = split_tagged_prompt(prompt) if self.plays_every_role and not roles else []
            if tagged:  # the joint protocol's prompt: answered role by role, in tags
                text = tagged_answer([self._answer(obs, seed) for obs in tagged])
            elif roles:
                text = combined_answer(
                    {role: self._answer(obs, seed) for role, obs in roles.items()}
                )
            else:
                text = self._answer(prompt, seed)
            generations.append(Generation(text, count_pieces(text)))
        return generations

    def _answer(self, observation: str, seed: int) -> str:
        """A seeded policy (the noisy oracle) draws from the call's seed; others ignore it."""
        if getattr(self.policy, "seeded", False):
            return self.policy(observation, seed)
        return self.policy(observation)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "tokens": SCRIPTED_TOKENS}


class TeamError(ValueError):
    """A team spec that cannot be read, or a team that cannot be made (a model that does not
    load, an endpoint that does not answer)."""


@dataclass(frozen=True)
class ModelOptions:
    """Settings of the model kinds that have any (recorded with the run)."""

    device: str = "auto"
    """hf: "auto" (CUDA when available), "cpu", "cuda", "cuda:1", ..."""
    dtype: str = "auto"
    """hf, vllm: torch dtype name, or "auto" (the checkpoint's)."""
    max_prompt_tokens: int = 4096
    """hf, vllm: prompts longer than this keep their last tokens (game histories grow long)."""
    chat_template_kwargs: dict[str, Any] | None = None
    """hf, vllm: options of the chat template, e.g. {"enable_thinking": False} for Qwen3."""
    vllm_kwargs: dict[str, Any] | None = None
    """vllm: settings of `vllm.LLM` (gpu_memory_utilization, max_model_len, ...)."""
    concurrency: int = 8
    """openai: requests in flight per endpoint, and episodes played at once."""
    timeout: float = 120.0
    """openai: seconds per request before it counts as failed (then retried)."""
    retries: int = 3
    """openai: retries of a failed request (connection errors, 408/409/429/5xx), with backoff."""
    api_key_env: str = "OPENAI_API_KEY"
    """openai: the environment variable holding the API key (local servers need none)."""
    episodes_at_once: int = 8
    """hf, vllm: episodes played at once, every live episode's prompts of a turn in one batched
    `generate`; 1 plays them one by one (for hf, the only way a sampled run repeats exactly;
    vLLM seeds each row). Their key/value caches share the device: lower it for a large model
    with long prompts."""
    threads: int | None = None
    """hf: torch's CPU threads; None: the given cores the load average leaves free (see
    `collabzoo.algos.runtime.placement.set_torch_threads`)."""


class CallSeeds:
    """Seeds for the generate calls of one episode: episode seed and call number give the seed,
    so a resumed or re-run episode samples the same way."""

    def __init__(self, episode_seed: int) -> None:
        self.episode_seed = episode_seed
        self.calls = 0

    def take(self, count: int) -> list[int]:
        seeds = [
            (self.episode_seed * 1_000_003 + self.calls + k) % _SEED_MODULUS for k in range(count)
        ]
        self.calls += count
        return seeds
