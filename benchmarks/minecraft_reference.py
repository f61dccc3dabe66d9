"""The reference's two games (OpenMLRL/LLM_Collab_Minecraft's BridgeBuild and ResourceGathering
files), loaded from a folder and driven as its trainers drive them.

benchmarks/game_speed.py times these turns against collabzoo's; the conformance scripts
(benchmarks/bridgebuild_conformance.py, benchmarks/resourcegathering_conformance.py) record
episodes played through them. The files are not in the reference repository's git history (they
were read from a public code index), so `--reference` names a folder holding them at their paths.
The scripts run as `python benchmarks/x.py` and import this module as a sibling.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

BRIDGE_FILE = "bridge_build/utils/bridge_builder.py"
GATHER_FILE = "resource_gathering/utils/resource_gathering.py"

BRIDGE_BLOCKS = [["oak_planks"], ["oak_planks"]]
"""The blocks each agent may place on the CoMLRL path."""

GATHER_CONFIG = {
    "path_slots": 4,
    "comm_limit": 1,
    "progress_reward_scale": 8.0,
    "terminal_bonus": 7.0,
    "move_cost_scale": 0.0,
    "comm_cost_scale": 0.0,
    "move_to_zone_bonus_scale": 0.05,
    "useful_comm_bonus_scale": 0.1,
    "first_enter_zone_bonus_scale": 0.15,
}
"""The reference config (configs/comlrl/resource_gathering_maac_config.yaml) as its trainer
builds the reward config."""


def load_reference(folder: Path, relative: str, name: str) -> ModuleType:
    """The reference's file `relative` under `folder`, imported as module `name`."""
    path = folder / relative
    if not path.is_file():
        raise SystemExit(f"--reference: no {relative} under {folder}")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def bridge_turn(ref: ModuleType, task: Any, state: Any, answers: list[str], max_probe: int) -> Any:
    """The reference's BridgeBuild turn on the CoMLRL path (view 3, 40 commands, oak planks)."""
    return ref.apply_turn(
        task=task,
        state=state,
        agent_outputs=answers,
        allowed_blocks_per_agent=BRIDGE_BLOCKS,
        max_commands_total=40,
        view=3,
        max_probe=max_probe,
    )


def gather_payload(ref: ModuleType, task: Any) -> dict[str, Any]:
    """The payload the reference's ResourceGathering trainer carries from turn to turn, at the
    start of an episode with the reference config (2 agents, 4 turns, view 2, 2 extraction
    targets within 2, paths of 4 moves)."""
    return ref.build_payload(
        task=task,
        state_before_turn=ref.make_initial_state(task, num_agents=2, max_turns=4),
        num_agents=2,
        view=2,
        extraction_limit=2,
        extraction_range=2,
        max_path_len=4,
        system_prompt="",
        user_template_single="",
        user_template_agent1="",
        user_template_agent2="",
        reward_config=GATHER_CONFIG,
    )


def team_answers(
    env: Any,
    observations: dict[str, str],
    policy: Callable[[str], str],
    spoil: Callable[[str], str] | None,
    turns: list[dict[str, Any]],
) -> list[str]:
    """A conformance episode's answers this turn: the scripted team's to collabzoo's prompts,
    each passed through `spoil` if given; once collabzoo's episode is over (the reference plays
    one turn more), the last turn's answers again."""
    if not env.agents:
        return turns[-1]["answers"]
    answers = [policy(observations[a]) for a in env.possible_agents]
    return [spoil(a) for a in answers] if spoil is not None else answers


def write_conformance(
    output: Path,
    document: dict[str, Any],
    kept: list[dict[str, Any]],
    added: list[dict[str, Any]],
    script: str,
    kinds: Sequence[str],
    seed: int,
    how: str,
) -> None:
    """Write a conformance set: the episodes kept, then those added, its provenance saying that
    `script` (a file of benchmarks/) added episodes of `kinds` with `seed`, and `how`."""
    document["episodes"] = kept + added
    document["provenance"]["scripted"] = (
        f"episodes of kinds {', '.join(kinds)}: benchmarks/{script} (seed {seed}), {how}"
    )
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    output.write_text(text + "\n", encoding="utf-8")
    print(f"{len(kept)} episodes kept, {len(added)} added: {output}")
