"""The published leaderboard rows (tasks.md, "Published numbers"), shown beside local results.

They come from the poster of "Learning Decentralized LLM Collaboration with Multi-Agent Actor
Critic": Time in seconds and Cost in tokens per episode, scores in percent, no intervals. They
were measured on the benchmark data (hub datasets, reference splits), so a local row is
comparable only when it ran on that data too.
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCE = 'poster of "Learning Decentralized LLM Collaboration with Multi-Agent Actor Critic"'

MODELS = {
    "tldr": "2× Qwen3-1.7B",
    "arxiv": "2× Qwen3-1.7B",
    "coophumaneval": "Qwen2.5-Coder-3B + Qwen3-Coder-4B",
    "strbuild": "Qwen3-4B-Instruct-2507 + Qwen2.5-3B-Instruct",
    "housebuild": "Qwen3-4B-Instruct-2507 + Qwen2.5-3B-Instruct",
}
"""The models behind the published rows, per task."""

METHOD_PROTOCOLS = {
    "Raw model": "single",
    "GRPO (1 agent)": "trained, 1 agent",
    "AC (1 agent)": "trained, 1 agent",
    "Parallel": "parallel",
    "Pipeline": "pipeline",
    "Discussion": "discussion",
    "MAGRPO": "trained",
    "CoLLM-DC (IAC)": "trained",
    "CoLLM-CC": "trained",
}
"""What each published method is, in this suite's protocol names where it is one of them."""


@dataclass(frozen=True)
class PublishedRow:
    method: str
    time: float
    cost: float
    scores: dict[str, float]

    @property
    def protocol(self) -> str:
        return METHOD_PROTOCOLS[self.method]


_TABLE = """
Raw model | 5.0/465/30.3 | 5.1/472/44.6 | 2.5/90/56.3 | 10.6/427/0.9/36.6 | 22.6/1016/99.6/43.2
GRPO (1 agent) | 4.1/387/91.7 | 4.2/398/91.0 | 2.5/88/61.8 | 10.3/411/0.4/46.1 | 22.0/890/100.0/54.6
AC (1 agent) | 4.0/374/94.5 | 4.3/392/95.3 | 2.5/91/62.5 | 10.3/413/0.4/49.8 | 22.1/904/100.0/55.9
Parallel | 2.3/244/22.9 | 2.3/246/49.0 | 2.3/138/50.0 | 9.4/232/15.7/5.9 | 19.2/502/21.8/46.1
Pipeline | 4.3/238/21.7 | 3.9/203/57.8 | 2.6/177/62.5 | 9.8/246/12.9/18.7 | 20.3/488/30.6/41.3
Discussion | 4.6/234/22.3 | 4.8/251/54.3 | 2.9/191/25.0 | 10.3/236/16.2/6.5 | 21.0/510/27.6/38.1
MAGRPO | 1.8/178/93.5 | 2.0/201/93.1 | 2.3/132/74.3 | 9.4/226/13.3/50.6 | 19.2/446/80.2/50.9
CoLLM-DC (IAC) | 1.9/194/95.4 | 2.0/196/94.1 | 2.5/161/59.1 | 9.3/182/7.6/44.6 | 19.4/470/43.8/46.8
CoLLM-CC | 1.8/181/95.2 | 1.9/188/95.0 | 2.6/166/75.2 | 9.5/239/7.3/68.5 | 19.0/442/86.4/52.7
"""
"""The poster's table as printed: Time/Cost/score columns per task."""

_TASK_ORDER = (
    ("tldr", ("Score",)),
    ("arxiv", ("Score",)),
    ("coophumaneval", ("Pass",)),
    ("strbuild", ("Adj", "IoU")),
    ("housebuild", ("HP", "IoU")),
)


def _parse() -> dict[str, list[PublishedRow]]:
    rows: dict[str, list[PublishedRow]] = {task: [] for task, _ in _TASK_ORDER}
    for line in _TABLE.strip().splitlines():
        method, *cells = (cell.strip() for cell in line.split("|"))
        for (task, names), cell in zip(_TASK_ORDER, cells, strict=True):
            time, cost, *scores = (float(v) for v in cell.split("/"))
            rows[task].append(
                PublishedRow(method, time, cost, dict(zip(names, scores, strict=True)))
            )
    return rows


PUBLISHED: dict[str, list[PublishedRow]] = _parse()
"""By env short name: the published rows of that task, in the poster's order."""
