"""The tagged joint answer of a centralized comparator (CoMLRL's
`TaggedCentralizedComparatorAdapter`): one prompt listing every agent's own prompt, one answer
holding a section per agent, <agent_0>...</agent_0> (index tags, as the reference names them).

Parsing takes, per agent i, the first match of <\\s*agent_i\\s*>(.*?)<\\s*/\\s*agent_i\\s*>
(case-insensitive, across lines), stripped; a missing section is "". An answer without any
section raises `TaggedParseError`: the caller counts and skips it (the reference's iterative
trainers let it abort training).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence


class TaggedParseError(ValueError):
    """A joint answer without any <agent_i> section."""


def joint_prompt(observations: Mapping[str, str], agents: Sequence[str]) -> str:
    """The coordinator's prompt: every agent's own prompt, then the answer format."""
    parts = [
        f"You coordinate a team of {len(agents)} agents. Write every agent's answer.",
    ]
    for index, agent in enumerate(agents):
        parts.append(f"Agent {index} ({agent}) original prompt:\n{observations[agent]}")
    tags = " ".join(f"<agent_{i}>...</agent_{i}>" for i in range(len(agents)))
    parts.append(f"Answer with one section per agent, in this form: {tags}")
    return "\n\n".join(parts)


def parse_tagged(text: str, agents: int) -> list[str]:
    """Each agent's section of a joint answer ("" where missing); `TaggedParseError` when no
    section is there at all, naming what was expected and the start of what was found."""
    sections: list[str] = []
    found = False
    for i in range(agents):
        match = re.search(
            rf"<\s*agent_{i}\s*>(.*?)<\s*/\s*agent_{i}\s*>", text, flags=re.IGNORECASE | re.DOTALL
        )
        found = found or match is not None
        sections.append(match.group(1).strip() if match else "")
    if not found:
        raise TaggedParseError(
            f"no <agent_i>...</agent_i> section for any of the {agents} agents in {text[:80]!r}"
        )
    return sections


__all__ = ["TaggedParseError", "joint_prompt", "parse_tagged"]
