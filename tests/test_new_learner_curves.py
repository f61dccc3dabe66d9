"""benchmarks/new_learner_curves.py, the learners pages' TinyCoop curves: each curve runs its
learner's learning test's settings (so a page's curve and the test's bound are about the same
run), and the stored file is self-consistent and re-plots without training."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import REPOSITORY, benchmark_module

STORED = REPOSITORY / "docs" / "assets" / "plots" / "new_learner_curves.json"


def module():
    return benchmark_module("new_learner_curves", registered="new_learner_curves_tests")


def options(arguments: list[str]) -> tuple[dict[str, str], set[str]]:
    """({option: value} but --set, {each --set value}): the order-free meaning of CLI settings."""
    named: dict[str, str] = {}
    sets: set[str] = set()
    for option, value in zip(arguments[::2], arguments[1::2], strict=True):
        assert option.startswith("--"), (option, arguments)
        if option == "--set":
            sets.add(value)
        else:
            named[option] = value
    return named, sets


def test_each_curve_runs_its_learning_tests_settings() -> None:
    from tests.test_atgrpo import ATGRPO_RUN, CLI_RUN
    from tests.test_joint_actor import JOINT_RUN
    from tests.test_named_learners_learn import COMMON
    from tests.test_preference_learning import COMMON as PREFERENCE_COMMON
    from tests.test_preference_learning import SETTINGS, UPDATES

    curves = module()
    ran = {algo: options(curves.settings(algo)) for algo in curves.LEARNERS}
    named_common = COMMON[4:]  # after "--env tinycoop --model tiny"
    assert COMMON[:4] == ["--env", "tinycoop", "--model", "tiny"]
    assert ran["marloo"] == ran["maremax"] == options(named_common)
    assert ran["atgrpo"] == options([*CLI_RUN, *ATGRPO_RUN])
    assert ran["joint"] == ran["joint-ac"] == options([*CLI_RUN, *JOINT_RUN])
    assert PREFERENCE_COMMON[:4] == ["--env", "tinycoop", "--model", "tiny"]
    for algo, settings in SETTINGS.items():
        expected = [*PREFERENCE_COMMON[4:], "--updates", str(UPDATES[algo])]
        expected += [part for setting in settings for part in ("--set", setting)]
        assert ran[algo] == options(expected), algo


def test_the_command_only_adds_evaluation_during_training() -> None:
    curves = module()
    for algo in curves.LEARNERS:
        named, sets = options(curves.command(algo, 3, "out")[2:])
        test_named, test_sets = options(["--output", "out", *curves.settings(algo)])
        assert named == {"--env": "tinycoop", "--model": "tiny", **test_named}
        added = sets - test_sets
        assert added == {
            f"eval_interval={curves.EVAL_INTERVAL.get(algo, 5)}",
            "eval_num_samples=64",
            "seed=3",
        }


def test_the_stored_curves_end_where_the_final_evaluation_does(tmp_path: Path) -> None:
    """The last in-training evaluation and the CLI's final one see the same weights and the
    same seeded 64 episodes, so they must agree; the update-0 point is the untrained team, near
    random play."""
    curves = module()
    results = curves.load_results(STORED)
    assert set(results["runs"]) == set(curves.LEARNERS)
    for algo, runs in results["runs"].items():
        assert len(runs) == len(results["seeds"]), algo
        for run in runs:
            assert run["updates"][0] == 0 and run["updates"] == sorted(run["updates"]), algo
            assert run["returns"][-1] == run["final"], (algo, run)
            assert run["returns"][0] <= 0.1, (algo, run)
    written = curves.plot(results, str(tmp_path))
    assert sorted(Path(p).name for p in written) == sorted(
        f"curve_{a.replace('-', '_')}.png" for a in curves.LEARNERS
    )
    assert all(Path(p).read_bytes()[:4] == b"\x89PNG" for p in written)
