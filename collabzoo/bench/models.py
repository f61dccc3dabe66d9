"""What a team is made of: text models that turn prompts into answers and count their tokens.

Three kinds share one small interface (`TextModel.generate`): scripted policies from the
package (here), Hugging Face models through the learners' `LLMPolicy` (`hf_model`), and any
OpenAI-compatible chat endpoint (`openai_model`). Protocols only ever call `generate`, so a
protocol works with every kind, and a new kind is one class.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from collabzoo.bench.protocols import combined_answer, split_combined_prompt

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

    With `plays_every_role`, it also reads the `single` protocol's combined prompt: each
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
        for prompt in prompts:
            roles = split_combined_prompt(prompt) if self.plays_every_role else {}
            if roles:
                text = combined_answer({role: self.policy(obs) for role, obs in roles.items()})
            else:
                text = self.policy(prompt)
            generations.append(Generation(text, count_pieces(text)))
        return generations

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "tokens": SCRIPTED_TOKENS}
