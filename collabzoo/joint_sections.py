"""One completion holding every agent's answer: the joint actor's prompt and parse.

A joint actor (CoMLRL's CentralizedMAGRPO) is one policy that writes the whole team's answer
from the joint observation. Its prompt lists every agent's own prompt and asks for one tagged
section per agent, `<agent_0>...</agent_0>`, indexed by the agent's position in play order (the
reference's tags, so its trained models and prompts carry over). The parse follows the
reference's: per agent, the first `<agent_i> ... </agent_i>` (any case, spaces inside the
brackets allowed, across lines), stripped; a missing section answers ""; a completion with no
section at all is unparsable and every agent answers "".

Both the learner (`collabzoo.algos`) and the bench's `joint` protocol read this module, so it
imports neither torch nor any other part of the package.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

JOINT_FORMATS = ("tagged", "fixed_width")
"""How a joint completion is cut into the agents' answers: the reference's tagged sections,
or (a collabzoo option for byte-level models trained from scratch, which never write a tag by
chance) consecutive runs of `section_width` characters."""


def tagged_prompt(prompts: Sequence[str]) -> str:
    """The reference's coordinator prompt: every agent's own prompt, then the tagged layout."""
    sections = "\n\n".join(f"Agent {i} original prompt:\n{p}" for i, p in enumerate(prompts))
    layout = "\n".join(f"<agent_{i}>\n...\n</agent_{i}>" for i in range(len(prompts)))
    return (
        f"You are a centralized coordinator producing the separate outputs of {len(prompts)} "
        "agents.\n\nEach output must satisfy its corresponding original prompt. Keep the outputs "
        "separate;\ndo not merge them or add commentary outside the required tags.\n\n"
        f"{sections}\n\nReturn exactly one section for each agent in this format:\n{layout}\n"
    )


_SECTION_HEAD = re.compile(r"^Agent (\d+) original prompt:\n", re.MULTILINE)
_LAYOUT_HEAD = "\n\nReturn exactly one section for each agent in this format:\n"


def split_tagged_prompt(prompt: str) -> list[str]:
    """The agents' prompts of a `tagged_prompt` in order ([] when it is not one): how a scripted
    team answers the joint protocol role by role."""
    end = prompt.rfind(_LAYOUT_HEAD)
    if end < 0:
        return []
    heads = [m for m in _SECTION_HEAD.finditer(prompt, 0, end)]
    if not heads or [int(m.group(1)) for m in heads] != list(range(len(heads))):
        return []
    stops = [m.start() - 2 for m in heads[1:]] + [end]  # each section ends before a blank line
    return [prompt[m.end() : stop] for m, stop in zip(heads, stops, strict=True)]


def tagged_answer(answers: Sequence[str]) -> str:
    """Answers in the tagged layout, agent i's inside `<agent_i>` ... `</agent_i>`."""
    return "\n".join(f"<agent_{i}>\n{a}\n</agent_{i}>" for i, a in enumerate(answers))


def state_prompt(state: str, count: int) -> str:
    """The joint prompt from the env's joint state (`env.state()`) instead of the agents'
    prompts, asking for the same tagged layout."""
    layout = "\n".join(f"<agent_{i}>\n...\n</agent_{i}>" for i in range(count))
    return (
        f"You are a centralized coordinator producing the separate outputs of {count} agents "
        "from the team's joint state below. Keep the outputs separate; do not add commentary "
        f"outside the required tags.\n\n{state}\n\nReturn exactly one section for each agent in "
        f"this format:\n{layout}\n"
    )


def fixed_width_prompt(prompts: Sequence[str], width: int) -> str:
    """Every agent's own prompt, then the fixed-width layout: agent 0's answer as exactly
    `width` characters, then agent 1's, and so on, with nothing between them."""
    sections = "\n\n".join(f"Agent {i} original prompt:\n{p}" for i, p in enumerate(prompts))
    return (
        f"You write the answers of {len(prompts)} agents.\n\n{sections}\n\nAnswer for agent 0 "
        f"in exactly {width} character(s), then for agent 1, and so on, with nothing between.\n"
    )


@dataclass
class JointParse:
    """The agents' answers cut from one joint completion, and what could not be read."""

    answers: list[str]
    found: list[int] = field(default_factory=list)
    """Indices of the agents whose section was found."""
    rejected: str = ""
    """The text outside every found section (what the parse did not use)."""

    @property
    def unparsable(self) -> bool:
        """No section at all: every agent answers "" (the reference's parse error)."""
        return not self.found


def parse_tagged(completion: str, count: int) -> JointParse:
    """The reference's parse of `<agent_i>...</agent_i>` sections (see the module docstring)."""
    text = str(completion)
    answers: list[str] = []
    found: list[int] = []
    spans: list[tuple[int, int]] = []
    for i in range(count):
        pattern = rf"<\s*agent_{i}\s*>(.*?)<\s*/\s*agent_{i}\s*>"
        match = re.search(pattern, text, flags=re.IGNORECASE | re.DOTALL)
        if match is None:
            answers.append("")
            continue
        answers.append(match.group(1).strip())
        found.append(i)
        spans.append(match.span())
    if not found:
        return JointParse([""] * count, [], text.strip())
    outside, last = [], 0
    for start, end in sorted(spans):
        if start >= last:
            outside.append(text[last:start])
            last = end
    outside.append(text[last:])
    return JointParse(answers, found, "".join(outside).strip())


def parse_fixed_width(completion: str, count: int, width: int) -> JointParse:
    """Agent i's answer is characters [i * width, (i + 1) * width) of the completion; an agent
    whose run is empty (the completion ended before it) answers "" and counts as not found."""
    if width < 1:
        raise ValueError(f"section_width must be at least 1, got {width}")
    answers = [completion[i * width : (i + 1) * width] for i in range(count)]
    found = [i for i, answer in enumerate(answers) if answer]
    return JointParse(answers, found, completion[count * width :])


def parse_joint(completion: str, count: int, fmt: str = "tagged", width: int = 1) -> JointParse:
    """Cut a joint completion into `count` answers in the format `fmt` (`JOINT_FORMATS`)."""
    if fmt == "tagged":
        return parse_tagged(completion, count)
    if fmt == "fixed_width":
        return parse_fixed_width(completion, count, width)
    raise ValueError(f"joint_format must be one of {JOINT_FORMATS}, got {fmt!r}")


__all__ = [
    "JOINT_FORMATS",
    "JointParse",
    "fixed_width_prompt",
    "parse_fixed_width",
    "parse_joint",
    "parse_tagged",
    "split_tagged_prompt",
    "state_prompt",
    "tagged_answer",
    "tagged_prompt",
]
