"""How a turn's prompt reaches the model: through its chat template, or as raw text.

The reference trainers of the Minecraft games (CoMLRL's MAGRPO and MAAC paths) render the first
turn's prompt through the model's chat template (a system message and a user message) but pass
every later turn's prompt, written by their external transition, as raw text: the system text,
a blank line, the user text, with no template and no generation prompt. An env reproduces that
by returning later observations as `RawPrompt`: a `str` (so any PettingZoo code sees text) whose
`chat_template` attribute is False. A policy that applies chat templates reads that attribute
and tokenizes such a text as it is; code that rebuilds the string loses the mark and templates
it, which is the cleaner behaviour.
"""

from __future__ import annotations

from typing import ClassVar

CHAT_TEMPLATE_MODES = ("first_turn", "every_turn", "never")
"""first_turn: the Minecraft references' quirk (later prompts raw); every_turn: each prompt
templated; never: each prompt raw, as CoMLRL's trainers tokenize a task's prompt text."""


class RawPrompt(str):
    """Text meant for the model as is: no chat template around it."""

    __slots__ = ()
    chat_template: ClassVar[bool] = False


def turn_prompt(text: str, chat_template: str, turn: int) -> str:
    """`text` as turn `turn`'s prompt (0: the first) under a `CHAT_TEMPLATE_MODES` mode: a
    `RawPrompt` with "never", and after the first turn with "first_turn"; else the text as it
    is."""
    if chat_template == "never" or (turn >= 1 and chat_template == "first_turn"):
        return RawPrompt(text)
    return text


def joined(system: str, user: str) -> str:
    """The reference's raw prompt: the system text, a blank line, the user text."""
    system, user = system.rstrip(), user.rstrip()
    return f"{system}\n\n{user}" if system else user


def with_previous_answer(prompt: str, answer: str, heading: str) -> str:
    """The reference's `previous_response`: the last answer (stripped) appended when non-empty."""
    answer = answer.strip()
    return f"{prompt.rstrip()}\n\n{heading}\n{answer}" if answer else prompt
