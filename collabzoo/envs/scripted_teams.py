"""Scripted reference teams: an oracle and a naive team for the building games, a heuristic
and a naive team for the writing tasks, an oracle for TinyCoop, and an oracle for the code tasks
whose dataset has reference solutions (`code_oracle`), and a noisy oracle for the building
games (`NoisyOracle`): a deliberately imperfect demonstrator for warm starts.

Each policy is an ordinary text policy: it reads only its observation (the role prompt the env
wrote, which must be in view: memory "full", the default) and returns an answer. Nothing in the
envs knows about them. The oracle reaches the maximum score on every target; the naive team
(both builders fill every target cell with their first block) shows what a policy that ignores
the collaboration rules earns. The writing heuristic is built to score near the maximum of the
writing rewards (see `tldr_heuristic_texts` and `arxiv_heuristic_texts`); the naive writers
both copy the first sentences of the source.
"""

from __future__ import annotations

import ast
import math
import random
import re
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from collabzoo.rewards.code import CodeProblem, parse_python
from collabzoo.rewards.writing import SPLIT_MARKER, word_set

Policy = Callable[[str], str]

_ROLE = re.compile(r"You are the (\w+) of (\d+) builders")
_ORDINALS = ("first", "second", "third", "fourth")
_TARGET_ROW = re.compile(r"^y=(\d+): ([#.]+)$", re.MULTILINE)
_OWN_BLOCKS = re.compile(r"^Your blocks: (.+?) \(and air", re.MULTILINE)
_BOX = re.compile(r"\((\d+), (\d+), (\d+), (\d+), (\d+), (\d+) ([\w:]+)\)")
_PLAN_LINE = re.compile(r"^y=\d+: \(.*$", re.MULTILINE)


def _role(observation: str) -> tuple[int, int]:
    """(my index in play order, number of builders), read from the role prompt."""
    match = _ROLE.search(observation)
    if match is None or match.group(1) not in _ORDINALS:
        raise ValueError("no role line ('You are the first of 2 builders') in the observation")
    return _ORDINALS.index(match.group(1)), int(match.group(2))


def _strbuild_target(observation: str) -> list[tuple[int, int]]:
    """Target cells (x, y) from the first target picture in the observation."""
    cells, seen_rows = [], set()
    for match in _TARGET_ROW.finditer(observation):
        y = int(match.group(1))
        if y in seen_rows:  # a later copy of the picture (history): keep the first
            break
        seen_rows.add(y)
        cells += [(x, y) for x, ch in enumerate(match.group(2)) if ch == "#"]
    if not cells:
        raise ValueError("no StrBuild target picture ('y=4: #...') in the observation")
    return cells


def _own_blocks(observation: str) -> list[str]:
    match = _OWN_BLOCKS.search(observation)
    if match is None:
        raise ValueError("no 'Your blocks: ...' line in the observation")
    return [b.strip() for b in match.group(1).split(",")]


def strbuild_oracle(observation: str) -> str:
    """Checkerboard split: cell (x, y) belongs to builder (x + y) mod n, so touching cells are
    always different builders' (different textures); each builder cycles through its blocks so
    that every one of them is used."""
    me, n = _role(observation)
    blocks = _own_blocks(observation)
    mine = [(x, y) for x, y in _strbuild_target(observation) if (x + y) % n == me]
    return "\n".join(
        f"/setblock {x} {y} 0 {blocks[k % len(blocks)]}" for k, (x, y) in enumerate(mine)
    )


def strbuild_naive(observation: str) -> str:
    """Every target cell with this builder's first block."""
    block = _own_blocks(observation)[0]
    return "\n".join(f"/setblock {x} {y} 0 {block}" for x, y in _strbuild_target(observation))


def _house_plan(observation: str) -> list[tuple[int, int, int, str]]:
    """Target cells (x, y, z, block) from the first house plan in the observation."""
    cells: list[tuple[int, int, int, str]] = []
    seen_layers: set[str] = set()
    for line in _PLAN_LINE.findall(observation):
        layer = line.split(":", 1)[0]
        if layer in seen_layers:
            break
        seen_layers.add(layer)
        for m in _BOX.finditer(line):
            x1, y1, z1, x2, y2, z2 = (int(v) for v in m.groups()[:6])
            cells += [
                (x, y, z, m.group(7))
                for y in range(y1, y2 + 1)
                for z in range(z1, z2 + 1)
                for x in range(x1, x2 + 1)
            ]
    if not cells:
        raise ValueError("no house plan ('y=0: (x1, y, z1, x2, y, z2 block)') in the observation")
    return cells


def _row_fills(cells: list[tuple[int, int, int, str]]) -> list[str]:
    """Fill commands for cells, merging runs along x of the same block in one (y, z) row."""
    commands: list[str] = []
    run: list[tuple[int, int, int, str]] = []
    for cell in sorted(cells, key=lambda c: (c[1], c[2], c[0])):
        if run and (cell[1:] != run[-1][1:] or cell[0] != run[-1][0] + 1):
            x1, y, z, block = run[0]
            commands.append(f"/fill {x1} {y} {z} {run[-1][0]} {y} {z} {block}")
            run = []
        run.append(cell)
    if run:
        x1, y, z, block = run[0]
        commands.append(f"/fill {x1} {y} {z} {run[-1][0]} {y} {z} {block}")
    return commands


def housebuild_oracle(observation: str) -> str:
    """Share each block kind evenly in plan order (each share is within the ~75% allowance),
    build it with merged row fills, and kill the spiders."""
    me, n = _role(observation)
    by_block: dict[str, list[tuple[int, int, int, str]]] = {}
    for cell in _house_plan(observation):
        by_block.setdefault(cell[3], []).append(cell)
    mine = []
    for cells in by_block.values():
        share = math.ceil(len(cells) / n)
        mine += cells[me * share : (me + 1) * share]
    return "\n".join([*_row_fills(mine), "/kill"])


def housebuild_naive(observation: str) -> str:
    """Every non-air cell of the house with the first block named in the plan; no /kill."""
    cells = _house_plan(observation)
    first = cells[0][3]
    return "\n".join(_row_fills([(x, y, z, first) for x, y, z, _ in cells]))


# ----- the writing tasks ---------------------------------------------------------------------
_SOURCE_BLOCK = re.compile(
    r"^--- (post|abstract) ---\n(.*?)\n--- end of \1 ---$", re.MULTILINE | re.DOTALL
)
_PART_LINE = re.compile(r"Your part: ([^.]+)\.")
_SENTENCE_BREAK = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+")
_WRITING_PARTS = ("concise", "detailed", "background", "methodology")


def _writing_source(observation: str) -> str:
    """The source text (post or abstract) of the first source block in the observation."""
    match = _SOURCE_BLOCK.search(observation)
    if match is None:
        raise ValueError("no '--- post ---' or '--- abstract ---' block in the observation")
    return match.group(2)


def _writing_part(observation: str) -> str:
    """Which text this agent writes: a role name, or "both" for the single writer."""
    match = _PART_LINE.search(observation)
    if match is None:
        raise ValueError("no 'Your part: ...' line in the observation")
    phrase = match.group(1)
    if phrase.startswith("both"):
        return "both"
    for part in _WRITING_PARTS:
        if part in phrase:
            return part
    raise ValueError(f"unknown writing part {phrase!r}")


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_BREAK.split(" ".join(text.split())) if s]


def _post_sentences(source: str) -> list[str]:
    """Sentences of a TLDR post's body: the text after 'POST:', or the whole source where
    there is no such label or the body is under 30 words."""
    _, found, body = source.partition("POST:")
    return _sentences(body if found and len(body.split()) >= 30 else source)


def _as_sentence(words: Iterable[str]) -> str:
    return " ".join(words).rstrip(" ,;:-.!?") + "."


def _joined(*parts: str) -> str:
    return " ".join(p for p in parts if p)


TLDR_CLOSING = (
    "In fact, the poster first wants to know what to do next. However, if nothing changes, "
    "the problem will likewise persist, for example as tension grows; as a result, overall, "
    "a clear plan matters."
)
"""The detailed summary's last sentences: a phrase from each of the 12 transition categories."""


def tldr_heuristic_texts(source: str) -> tuple[str, str]:
    """(concise, detailed) summaries of a post, built to score near the TLDR maximum.

    Both agents run this same function on the same post, so each knows the other's text
    exactly and returns its own half. Level by level:
    1. The concise summary is the post's first whole sentences, at least 14 words and 110
       characters (up to 36 words, else cut at 28); the detailed one is 50-100 words. Both
       are in 8..256.
    2. The detailed summary restates the concise one ("In short, ..."), adds the post's next
       whole sentences while it stays under 2.9 times the concise length, and ends with
       `TLDR_CLOSING`; the 110-character floor keeps the ratio under 3.2 even with no middle.
    3. The closing adds about 30 distinct words, so the detailed summary has at least twice
       the distinct words; if not, the concise one loses words from its end until it does.
    4. `TLDR_CLOSING` holds a phrase of every one of the 12 transition categories (T = 0.95,
       the most 12 categories can earn: 1.0 would need 13), and restating the concise summary
       shares all of its content words (Jaccard far above 0.03).
    The best total is 0.5 + 1.0 + 0.5 + 0.4 * 0.95 + 0.6 = 2.98.
    """
    sentences = _post_sentences(source)
    words = " ".join(sentences).split()
    if not words:
        return "", ""
    taken, count = 0, 0
    while taken < len(sentences) and (count < 14 or len(" ".join(words[:count])) < 110):
        count += len(sentences[taken].split())
        taken += 1
    if count > 36:  # a long sentence: cut it
        count = 28
    while True:
        concise = _as_sentence(words[:count])
        core = concise[:-1]
        if not (core[:2] in ("I ", "I'") or core.split()[0].isupper()):
            core = core[:1].lower() + core[1:]
        middle: list[str] = []
        for sentence in sentences[taken:]:
            trial = _joined(f"In short, {core}.", *middle, sentence, TLDR_CLOSING)
            if len(trial) > 2.9 * len(concise):
                break
            middle.append(sentence)
        detailed = _joined(f"In short, {core}.", *middle, TLDR_CLOSING)
        if count <= 10 or len(word_set(detailed)) >= 2.05 * len(word_set(concise)):
            return concise, detailed
        count -= 1


ARXIV_BACKGROUND_OPEN = (
    "To begin with, this work addresses a question that matters in practice, and in particular "
    "one that earlier approaches leave open."
)
ARXIV_BACKGROUND_CLOSE = (
    "Therefore, a clearer account is needed; however, the difficulty is not only a matter of "
    "data, since related settings, such as larger ones, share it."
)
ARXIV_BACKGROUND_EXTRA = (
    "Earlier studies have approached this question from several directions, yet their "
    "conclusions do not agree, and the reasons for the disagreement remain unclear."
)
ARXIV_METHOD_OPEN = "Specifically, the work proceeds in several steps."
ARXIV_METHOD_CLOSE = (
    "In summary, the results matter beyond this study: similarly, if they hold in other "
    "settings, they could guide later work, although further tests are still needed. Overall, "
    "the approach is, indeed, a useful step."
)
ARXIV_METHOD_EXTRA = (
    "Each step is checked against the earlier ones, so that the results can be compared directly."
)


def _grow(parts: list[str], pool: Iterable[str], close: str, too_long: Callable[[str], bool]):
    """Append whole sentences of `pool` to `parts` while the text (with `close`) fits."""
    for sentence in pool:
        if too_long(_joined(*parts, sentence, close)):
            return False
        parts.append(sentence)
    return True


def _grow_words(parts: list[str], sentence: str, close: str, too_long: Callable[[str], bool]):
    """Append the longest start of `sentence` that fits, as a sentence."""
    words = sentence.split()
    while words and too_long(_joined(*parts, _as_sentence(words), close)):
        words.pop()
    if words:
        parts.append(_as_sentence(words))


def arxiv_heuristic_texts(source: str) -> tuple[str, str]:
    """(background, methodology) parts from an abstract, built to score near the arXiv maximum.

    Both agents run this same function on the same abstract, so each knows the other's text
    exactly and returns its own half. Level by level:
    1. The background is a fixed opening, the abstract's first sentences up to 160 words in
       all (whole sentences; the start of one more, or fixed filler, if it would stay under
       140) and a fixed closing. The methodology stays under 250 words. Both are in 128..256.
    2. The methodology (a fixed opening, sentences, a fixed closing) is grown to 1.40-1.52
       times the background's length in characters, inside the full-credit band 1.3-1.6.
    3. Its sentences are the abstract's, in order, while the distinct-word ratio stays at most
       1.2; otherwise it restates a sentence the background already used ("As noted above,
       ..."), which adds length but few new words, so the ratio stays inside 0.7-1.3.
    4. The four fixed sentences together hold a phrase of all 12 transition categories
       (T = 0.95, the most there is), and both parts quote the same abstract sentences, so the
       Jaccard similarity of their content words is about 0.5, above the 0.23 cap.
    The best total is 0.5 + 1.0 + 0.5 + 0.4 * 0.95 + 0.6 = 2.98.
    """
    sentences = _sentences(source)
    parts = [ARXIV_BACKGROUND_OPEN]
    close = ARXIV_BACKGROUND_CLOSE

    def background_too_long(text: str) -> bool:
        return len(text.split()) > 160

    all_fit = _grow(parts, sentences, close, background_too_long)
    if not all_fit and len(_joined(*parts, close).split()) < 140:
        _grow_words(parts, sentences[len(parts) - 1], close, background_too_long)
    used = parts[1:]
    _grow(parts, [ARXIV_BACKGROUND_EXTRA] * 4, close, lambda t: len(t.split()) > 150)
    background = _joined(*parts, close)
    distinct = len(word_set(background))

    def method_too_long(text: str) -> bool:
        return len(text) > 1.52 * len(background) or len(text.split()) > 250

    fresh = list(sentences)
    recaps = [f"As noted above, {s[:1].lower()}{s[1:]}" for s in used]
    parts = [ARXIV_METHOD_OPEN]
    close = ARXIV_METHOD_CLOSE
    extras = [ARXIV_METHOD_EXTRA] * 4
    while len(_joined(*parts, close)) < 1.40 * len(background):
        if fresh and (
            not recaps or len(word_set(_joined(*parts, fresh[0], close))) <= 1.2 * distinct
        ):
            sentence = fresh.pop(0)
        elif recaps or extras:
            sentence = (recaps or extras).pop(0)
        else:
            break
        if method_too_long(_joined(*parts, sentence, close)):
            _grow_words(parts, sentence, close, method_too_long)
            break
        parts.append(sentence)
    return background, _joined(*parts, close)


def _writing_answer(observation: str, texts: Callable[[str], tuple[str, str]]) -> str:
    source = _writing_source(observation)
    first, second = texts(source)
    part = _writing_part(observation)
    if part == "both":
        return f"{first}\n{SPLIT_MARKER}\n{second}"
    return first if part in ("concise", "background") else second


def tldr_heuristic(observation: str) -> str:
    return _writing_answer(observation, tldr_heuristic_texts)


def arxiv_heuristic(observation: str) -> str:
    return _writing_answer(observation, arxiv_heuristic_texts)


def _first_sentences(observation: str, sentences: Callable[[str], list[str]]) -> str:
    """The first three sentences of the source; the single writer gives them as both parts."""
    copied = " ".join(sentences(_writing_source(observation))[:3])
    if _writing_part(observation) == "both":
        return f"{copied}\n{SPLIT_MARKER}\n{copied}"
    return copied


def tldr_naive(observation: str) -> str:
    """The post's first three sentences, whatever the role."""
    return _first_sentences(observation, _post_sentences)


def arxiv_naive(observation: str) -> str:
    """The abstract's first three sentences, whatever the role."""
    return _first_sentences(observation, _sentences)


TEAMS: dict[str, dict[str, Policy]] = {
    "oracle": {"strbuild": strbuild_oracle, "housebuild": housebuild_oracle},
    "naive": {
        "strbuild": strbuild_naive,
        "housebuild": housebuild_naive,
        "tldr": tldr_naive,
        "arxiv": arxiv_naive,
    },
    "heuristic": {"tldr": tldr_heuristic, "arxiv": arxiv_heuristic},
}


NOISY_DROP = 0.3
"""The noisy oracle's default chance of dropping each line of its answer."""


class NoisyOracle:
    """The oracle of a building game with each line of its answer dropped with probability
    `drop` (a `/kill` line too): a demonstrator that is right about what it builds but leaves
    holes, so a policy warm-started on its episodes has room to improve on the task's own
    metrics (IoU, HP) by reinforcement.

    Seeded: `policy(observation, seed)` draws its drops from `seed`, so the episodes of a
    benchmark run (which hands every call a seed) differ and replay exactly; without a seed the
    draws come from the observation's checksum, the same answer each time."""

    seeded = True

    def __init__(self, game: str, drop: float = NOISY_DROP) -> None:
        if game not in NOISY_GAMES:
            raise ValueError(
                f"no noisy oracle for {game!r}; it plays the building games {NOISY_GAMES}"
            )
        if isinstance(drop, bool) or not isinstance(drop, (int, float)) or not 0 <= drop < 1:
            raise ValueError(f"drop must be a probability in [0, 1), got {drop!r}")
        self.game = game
        self.drop = float(drop)
        self.oracle = TEAMS["oracle"][game]

    def __call__(self, observation: str, seed: int | None = None) -> str:
        draws = random.Random(zlib.crc32(observation.encode()) if seed is None else seed)
        lines = self.oracle(observation).split("\n")
        return "\n".join(line for line in lines if draws.random() >= self.drop)


NOISY_GAMES = ("strbuild", "housebuild")


# ----- TinyCoop ------------------------------------------------------------------------------
_TINYCOOP_ROUND = re.compile(r"\b(alpha|beta) r\d+/\d+ s=([01])\b")


def tinycoop_oracle(observation: str) -> str:
    """The roles: alpha answers a character of the signal's parity ("0" even, "1" odd), beta
    one of the other parity, so every turn is won. Reads the newest round line
    ("beta r2/4 s=1") of the observation, so it works with every memory mode."""
    rounds = _TINYCOOP_ROUND.findall(observation)
    if not rounds:
        raise ValueError("no TinyCoop round line ('alpha r1/4 s=1') in the observation")
    agent, signal = rounds[-1]
    return signal if agent == "alpha" else str(1 - int(signal))


TEAMS["oracle"]["tinycoop"] = tinycoop_oracle


# ----- the code tasks ------------------------------------------------------------------------
CODE_GAMES = ("coophumaneval", "humaneval", "mbpp")
_CODE_ROLE_LINES = (
    ("aux", "you write a helper function named `aux`"),
    ("main", "Your partner writes a helper function `aux(...)`; you write the function"),
    ("solver", "Solve this coding problem."),
)


def _code_role(observation: str) -> str:
    """aux, main or solver: whichever role line comes first in the observation."""
    found = [(observation.find(line), role) for role, line in _CODE_ROLE_LINES]
    found = [(at, role) for at, role in found if at >= 0]
    if not found:
        raise ValueError("no code-task role line ('you write a helper function named `aux`')")
    return min(found)[1]


def _arguments(function: ast.FunctionDef) -> tuple[str, str]:
    """(the parameter list as written, the call passing each parameter on) of a function."""
    a = function.args
    passed = [p.arg for p in (*a.posonlyargs, *a.args)]
    if a.vararg is not None:
        passed.append(f"*{a.vararg.arg}")
    passed += [f"{p.arg}={p.arg}" for p in a.kwonlyargs]
    if a.kwarg is not None:
        passed.append(f"**{a.kwarg.arg}")
    return ast.unparse(a), ", ".join(passed)


def _oracle_answers(problem: CodeProblem) -> dict[str, str]:
    """The oracle's answer for each role: aux is the reference solution renamed `aux`, main
    hands every argument to it, the solver writes both."""
    tree = parse_python(problem.prompt + problem.solution)
    function = next(
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name == problem.entry_point
    )
    parameters, call = _arguments(function)
    function.name = "aux"
    aux = ast.unparse(function)
    main = f"def {problem.entry_point}({parameters}):\n    return aux({call})"
    return {"aux": aux, "main": main, "solver": f"{aux}\n\n\n{main}"}


def code_oracle(problems: Iterable[CodeProblem]) -> Policy:
    """A team for the code tasks built from the dataset's reference solutions (HumanEval has
    them; CoopHumanEval and MBPP do not). The one scripted policy that reads more than its
    observation: it finds its problem by the statement quoted in the observation and answers
    from the solution it was given, so it measures the scoring and the sandbox, not a model.

    Every test passes (Pass 100%) wherever the reference solution runs in the program the task
    builds (HumanEval/10 calls the prompt's `is_palindrome`, /32 its `poly`, which needs
    prompt_context="definitions"), and main is a thin wrapper around aux by design, so the
    reward is 3.0 of 4.0: the last 1.0 pays for splitting real work between the two functions,
    which no script can do from one reference solution.
    """
    answers: dict[str, dict[str, str]] = {}
    for problem in problems:
        if not problem.solution.strip():
            raise ValueError(
                f"{problem.task_id} has no reference solution: the code oracle needs a dataset "
                "with canonical solutions (HumanEval has them; CoopHumanEval and MBPP do not)"
            )
        answers[problem.prompt.strip()] = _oracle_answers(problem)
    if not answers:
        raise ValueError("the code oracle needs at least one problem")

    def policy(observation: str) -> str:
        role = _code_role(observation)
        for statement, by_role in answers.items():
            if statement in observation:
                return by_role[role]
        raise ValueError("the observation quotes none of the oracle's problems")

    return policy


CODE_ORACLE_GAMES = ("humaneval",)
"""The code tasks whose dataset has reference solutions, so `code_oracle` plays them."""


def scripted_team(
    game: str, kind: str, env: Any = None
) -> Callable[[Mapping[str, str]], dict[str, str]]:
    """A team: observations by agent in, answers by agent out. The oracle of a code task
    (HumanEval: `code_oracle`) answers from the env's reference solutions, so it needs `env`
    (the env it plays, or any with the same problems); the bench plays the same oracle."""
    if kind == "oracle" and game in CODE_GAMES:
        if env is None:
            raise ValueError(
                f"the {game} oracle answers from the dataset's reference solutions: pass the "
                f"env it plays, scripted_team({game!r}, 'oracle', env=collabzoo.make({game!r}, "
                "data=PATH))"
            )
        policy = code_oracle(env.items("all"))  # every problem, the ones in no slice too
    else:
        try:
            policy = TEAMS[kind][game]
        except KeyError:
            plays = {k: sorted(g) for k, g in TEAMS.items()}
            plays["oracle"] = sorted([*plays["oracle"], *CODE_ORACLE_GAMES])
            offered = "; ".join(f"{k}: {', '.join(g)}" for k, g in sorted(plays.items()))
            raise ValueError(
                f"no scripted {kind!r} team for {game!r}; the teams and their games: {offered}"
            ) from None

    def act(observations: Mapping[str, str]) -> dict[str, str]:
        return {agent: policy(obs) for agent, obs in observations.items()}

    return act
