"""Task families as units: no task is named outside its family, the suite reads everything from
the declarations, the old import paths still work, and a family from another package plugs in.

Run as a script, it prints the count the issue measures: for each task, the files outside its
family's folder whose code (docstrings and comments not counted) names it.

    python tests/test_task_families.py
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import textwrap
import tokenize
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]
PACKAGE = REPOSITORY / "collabzoo"
REGISTRATION = {PACKAGE / "envs" / "__init__.py"}
"""Where the package's own families are listed: the one place allowed to name them."""


# ----- the count -----------------------------------------------------------------------------
def code_text(path: Path) -> str:
    """A module's code tokens, lower-cased, without its comments and docstrings."""
    source = path.read_text()
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            for statement in node.body:
                value = getattr(statement, "value", None)
                if (
                    isinstance(statement, ast.Expr)
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, str)
                ):
                    docstrings.add(statement.lineno)
            # a docstring of an assignment (`NAME = ...` then a string) is a docstring too
            for before, after in zip(node.body, node.body[1:], strict=False):
                value = getattr(after, "value", None)
                if (
                    isinstance(before, (ast.Assign, ast.AnnAssign))
                    and isinstance(after, ast.Expr)
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, str)
                ):
                    docstrings.add(after.lineno)
    kept = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            continue
        if token.type == tokenize.STRING and token.start[0] in docstrings:
            continue
        kept.append(token.string)
    return " ".join(kept).lower()


def task_names() -> dict[str, tuple[Path, list[str]]]:
    """Each declared task: (its family's folder, the names it goes by)."""
    from collabzoo.envs import families

    names = {}
    for family in families():
        for spec in family.tasks:
            module = spec.entry_point.partition(":")[0]
            folder = PACKAGE.parent.joinpath(*module.split(".")[:3])
            words = {spec.short_name, spec.columns.title.lower(), spec.id.lower()}
            names[spec.id] = (folder, sorted(words))
    return names


def mentions() -> dict[str, list[str]]:
    """By task id: the package's files outside its family's folder whose code names it."""
    texts = {path: code_text(path) for path in sorted(PACKAGE.rglob("*.py"))}
    found = {}
    for task, (folder, words) in task_names().items():
        pattern = re.compile("|".join(rf"(?<![a-z0-9_]){re.escape(w)}(?![a-z0-9_])" for w in words))
        found[task] = [
            str(path.relative_to(REPOSITORY))
            for path, text in texts.items()
            if folder not in path.parents and path not in REGISTRATION and pattern.search(text)
        ]
    return found


def test_no_task_is_named_outside_its_family() -> None:
    named = {task: files for task, files in mentions().items() if files}
    assert not named, f"tasks named outside their family's folder: {named}"


def test_the_count_sees_a_planted_mention(tmp_path: Path) -> None:
    planted = PACKAGE / "bench" / "planted_mention_check.py"
    planted.write_text('"""StrBuild in a docstring does not count."""\n\nX = {"strbuild": 1}\n')
    try:
        assert mentions()["collabzoo/StrBuild-v0"] == ["collabzoo/bench/planted_mention_check.py"]
        planted.write_text('"""StrBuild in a docstring does not count."""\n\n# nor strbuild\n')
        assert mentions()["collabzoo/StrBuild-v0"] == []
    finally:
        planted.unlink()


# ----- what users hold -----------------------------------------------------------------------
def python(code: str, **environment: str) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **environment},
    )


def test_old_import_paths_give_the_moved_modules_themselves() -> None:
    """Each old path, imported first in a fresh interpreter, is the module object itself."""
    from collabzoo.envs import families

    moved = {old: new for f in families() for old, new in f.module_paths.items()}
    assert len(moved) == 15
    code = textwrap.dedent(f"""
        import importlib
        moved = {moved!r}
        for old, new in moved.items():
            assert importlib.import_module(old) is importlib.import_module(new), old
        from collabzoo.rewards import strbuild
        from collabzoo.envs.code import CoopHumanEvalEnv
        from collabzoo.envs.scripted_teams import strbuild_oracle, code_oracle, TEAMS
        import collabzoo.tasks.building.teams as teams
        assert strbuild_oracle is teams.strbuild_oracle
        assert strbuild.score_strbuild.__module__ == "collabzoo.tasks.building.rewards.strbuild"
        print(sorted(TEAMS))
    """)
    done = python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['heuristic', 'naive', 'oracle']"


def test_a_familys_rewards_import_without_its_envs() -> None:
    code = (
        "import sys, collabzoo.tasks.building.rewards.strbuild, collabzoo.tasks.code.rewards, "
        "collabzoo.tasks.writing.rewards; "
        "envs = [m for m in sys.modules if m.startswith('collabzoo.tasks.') and '.envs' in m]; "
        "assert not envs, envs"
    )
    done = python(code)
    assert done.returncode == 0, done.stderr


def test_the_readmes_first_command_gives_the_same_leaderboard(tmp_path: Path) -> None:
    """`collabzoo bench --env embedded ...` then `collabzoo leaderboard`, as before the families
    had folders (tests/data/readme_leaderboard.md, wall-clock Time masked)."""
    command = [sys.executable, "-m", "collabzoo.cli"]
    teams = [
        "--team",
        "scripted:oracle",
        "--team",
        "scripted:heuristic",
        "--team",
        "scripted:naive",
    ]
    bench = [*command, "bench", "--env", "embedded", *teams, "--protocol", "single,parallel"]
    done = subprocess.run(bench, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    board = subprocess.run(
        [*command, "leaderboard", "results"], cwd=tmp_path, capture_output=True, text=True
    )
    assert board.returncode == 0, board.stderr
    lines = []
    for line in board.stdout.splitlines():
        cells = line.split(" | ")
        if line.startswith("| scripted:") and len(cells) > 6:
            cells[5] = "TIME"
        lines.append(" | ".join(cells))
    expected = (REPOSITORY / "tests" / "data" / "readme_leaderboard.md").read_text()
    got = sections("\n".join(lines) + "\n")
    before = sections(expected)
    # the tasks the golden file holds read the same; a family added since adds its own table
    assert {title: got.get(title) for title in before} == before
    assert list(got)[: len(before)] == list(before)


def sections(board: str) -> dict[str, str]:
    """A leaderboard by its parts: the text before the first table, then each task's table."""
    head, *tables = board.split("\n## ")
    found = {"": head.split(" run(s).")[1]}  # the run count grows with the tasks
    for table in tables:
        title, _, body = table.partition("\n")
        found[title] = body
    return found


def test_the_suites_tables_come_from_the_declarations() -> None:
    from collabzoo.bench.columns import board_order, task_columns
    from collabzoo.bench.published import published

    seed_tasks = [
        "tldr", "arxiv", "coophumaneval", "humaneval", "mbpp", "strbuild", "housebuild", "tinycoop"
    ]  # fmt: skip
    assert [name for name in board_order() if name in seed_tasks] == seed_tasks
    assert board_order()[: len(seed_tasks)] == seed_tasks  # the paper's tasks, then the rest
    assert [r.scores for r in published()["strbuild"]][-1] == {"Adj": 7.3, "IoU": 68.5}
    assert [c.name for c in task_columns("housebuild").columns] == ["HP", "IoU"]
    # an env registered without a declaration, in a process of its own (the registry keeps it)
    done = python(
        "from collabzoo.envs import register, task_spec\n"
        "register('collabzoo/PlainEnvCheck-v0', 'collabzoo.tasks.tinycoop.envs:TinyCoopEnv', 'p')\n"
        "plain = task_spec('plainenvcheck')\n"
        "print([c.name for c in plain.columns.columns], dict(plain.teams))"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['Reward'] {}"


# ----- a family from another package ---------------------------------------------------------
GUIDE = REPOSITORY / "docs" / "guides" / "add-a-task.md"


def sumto_package(root: Path) -> Path:
    """The guide's SumTo family as an installed package would be: its modules, declared by
    strings, and a distribution's entry point in the `collabzoo.tasks` group."""
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.S)
    package = root / "mytasks"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""Tasks of my own."""\n')
    (package / "sumto.py").write_text("\n\n".join(blocks[:3]))  # rules, env, teams
    (package / "family.py").write_text(
        textwrap.dedent("""
            from collabzoo.envs import TaskFamily, TaskSpec
            from collabzoo.envs.family import Column, TaskColumns

            FAMILY = TaskFamily(
                name="sumto",
                tasks=(
                    TaskSpec(
                        id="collabzoo/SumTo-v0",
                        entry_point="mytasks.sumto:SumToEnv",
                        description="Two numbers that add up to a target (H=1).",
                        columns=TaskColumns("SumTo", (Column("Hit", "hit"),), plotted="Hit"),
                        teams={"oracle": "mytasks.sumto:sumto_oracle",
                               "naive": "mytasks.sumto:sumto_naive"},
                        offline={},
                        default_data="built-in targets",
                        demo_metrics=("hit",),
                    ),
                ),
            )
        """)
    )
    info = root / "mytasks-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mytasks\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[collabzoo.tasks]\nsumto = mytasks.family:FAMILY\n")
    return root


def test_a_family_from_an_entry_point_plays_through_the_cli(tmp_path: Path) -> None:
    import os

    root = sumto_package(tmp_path / "site")
    work = tmp_path / "work"
    work.mkdir()
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(REPOSITORY)])}

    def cli(*arguments: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "collabzoo.cli", *arguments],
            cwd=work,
            env=environment,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"collabzoo {' '.join(arguments)}:\n{done.stderr[-3000:]}"
        return done.stdout + done.stderr

    assert "collabzoo/SumTo-v0" in cli("list")
    out = cli("bench", "--env", "sumto", "--team", "scripted:oracle", "--team", "scripted:naive")
    assert "Hit 100.0" in out and "Hit 0.0" in out
    board = cli("leaderboard", "results")
    assert "| scripted:oracle | parallel | built-in targets | eval | 2 |" in board
    assert "Hit %" in board
    assert "2 episodes, 2 turns re-scored as recorded" in cli(
        "rescore", "results/sumto__parallel__scripted-oracle__eval.json"
    )
    demo = cli("demo", "--envs", "sumto")
    assert re.search(r"sumto\s+oracle\s+eval\s+2\s+2\.000\s+2\.000\s+1\.000", demo), demo
    embedded = cli(
        "bench",
        "--env",
        "embedded",
        "--team",
        "scripted:oracle",
        "--episodes",
        "1",
        "--output",
        "all",
    )
    assert "sumto | scripted:oracle | parallel | 1 episodes" in embedded


if __name__ == "__main__":
    for task, files in mentions().items():
        print(f"{task}: {len(files)} file(s) outside its family", *files, sep="\n  ")
    sys.exit(pytest.main([__file__, "-q", "-k", "named_outside"]))
