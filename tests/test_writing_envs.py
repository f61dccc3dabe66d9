"""The writing envs (TLDR-v0, ArXiv-v0): data sources, prompts, feedback, copying, the scripted
teams, and the offline fallback to the embedded sample. No test here touches the network."""

from __future__ import annotations

import copy
import json
import math
import random
import re
import warnings

import pytest
from pettingzoo.test import parallel_api_test

import collabzoo
from collabzoo.envs.scripted_teams import (
    ARXIV_BACKGROUND_CLOSE,
    ARXIV_BACKGROUND_OPEN,
    ARXIV_METHOD_CLOSE,
    ARXIV_METHOD_OPEN,
    TLDR_CLOSING,
    listed_games,
    scripted_team,
)
from collabzoo.tasks.writing import envs as writing
from collabzoo.tasks.writing.rewards import (
    SPLIT_MARKER,
    score_arxiv,
    score_tldr,
    transition_categories,
)

TASKS = ["tldr", "arxiv"]
ROLES = {"tldr": ("concise", "detailed"), "arxiv": ("background", "methodology")}
SCORERS = {"tldr": score_tldr, "arxiv": score_arxiv}


def sample_env(task: str, **kwargs):
    return collabzoo.make(task, data="sample", **kwargs)


def every_item(env):
    for split in ("train", "eval"):
        for index in range(len(env.items(split))):
            yield {"task": index, "split": split}


def messy_answer(rng: random.Random, good: str) -> str:
    """A good answer with noise words spliced in, or a shuffled part of it with noise."""
    words = good.split()
    noise = ["however", "ü😀", SPLIT_MARKER, "", "\n\n", "if", "data"]
    if rng.random() < 0.5:
        for _ in range(rng.randint(0, 4)):
            words.insert(rng.randint(0, len(words)), rng.choice(noise))
        return " ".join(words)
    rng.shuffle(words)
    kept = words[: rng.randint(0, len(words))] + rng.choices(noise, k=rng.randint(0, 6))
    rng.shuffle(kept)
    return " ".join(kept)


def play_episode(env, seed: int, answer_seed: int, options=None):
    """Every observation, reward and info of one episode with seeded messy answers."""
    rng = random.Random(answer_seed)
    team = scripted_team(env.metadata["name"].split("_")[0], "heuristic")
    obs, infos = env.reset(seed=seed, options=options)
    trace = [(obs, infos)]
    while env.agents:
        good = team(obs)
        step = env.step({a: messy_answer(rng, good[a]) for a in env.agents})
        obs = step[0]
        trace.append(step)
    return trace


@pytest.fixture
def no_hub(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A process that has not yet tried the hub, and hub data that cannot be loaded (as
    `collabzoo.envs.hub` answers at once for an unreachable hub and no cached copy); the list
    collects the hub sources a load was attempted for."""
    attempts: list[str] = []
    monkeypatch.setattr(writing, "_hub_failures", {})

    def refuse(source, split=None):
        attempts.append(str(source))
        raise ConnectionError("refused in this test")

    monkeypatch.setattr(writing, "load_records", refuse)
    return attempts


# ----- the PettingZoo contract ----------------------------------------------------------------
@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("single_agent", [False, True])
def test_parallel_api_with_the_embedded_sample(task: str, single_agent: bool) -> None:
    env = sample_env(task, single_agent=single_agent, horizon=3)
    parallel_api_test(env, num_cycles=10)
    expected = ["writer"] if single_agent else list(ROLES[task])
    assert env.possible_agents == expected
    assert env.max_reward == 3.0 and env.horizon == 3


@pytest.mark.parametrize("task", TASKS)
def test_default_data_without_network_falls_back_to_the_sample(task: str, no_hub) -> None:
    env = collabzoo.make(task)
    with pytest.warns(writing.SampleDataWarning) as caught:
        _, infos = env.reset(seed=0)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "ConnectionError: refused in this test" in message
    assert "embedded sample" in message and "12 short" in message
    assert "NOT the benchmark" in message and "(8 train, 4 eval)" in message
    assert "data=" in message and "HF_HUB_OFFLINE=1" in message
    assert env.hub_id in message
    assert all(info["dataset"] == "sample" for info in infos.values())
    sample = sample_env(task)
    assert [i.source for i in env.items("eval")] == [i.source for i in sample.items("eval")]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once per process: a second env is silent
        collabzoo.make(task).reset(seed=1)
    assert no_hub == [env.hub_id], "one load (fast, see collabzoo.envs.hub), never retried"


def test_failed_hub_load_falls_back_once_and_is_not_retried(no_hub) -> None:
    env = collabzoo.make("tldr")
    with pytest.warns(writing.SampleDataWarning, match="ConnectionError: refused in this test"):
        env.reset(seed=0)
    env.items("eval")
    collabzoo.make("tldr").items("train")
    assert no_hub == ["trl-lib/tldr"], "one attempt per process and dataset"


def test_hub_records_use_the_reference_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def fake_hub(source, split=None):
        calls.append((source, split))
        return [
            {"prompt": f"POST: post {n} of {split}\n\nTL;DR:", "completion": " x"} for n in range(3)
        ]

    monkeypatch.setattr(writing, "_hub_failures", {})
    monkeypatch.setattr(writing, "load_records", fake_hub)
    env = collabzoo.make("tldr")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, infos = env.reset(seed=0, options={"split": "eval", "task": 2})
    assert infos["concise"]["dataset"] == "trl-lib/tldr"
    assert env.item.source == "POST: post 2 of test[:1100]", "the TL;DR: cue is stripped"
    env.items("train")
    assert calls == [("trl-lib/tldr", "test[:1100]"), ("trl-lib/tldr", "train[:1100]")]
    arxiv = collabzoo.make("arxiv", data="someone/abstracts")
    monkeypatch.setattr(
        writing,
        "load_records",
        lambda source, split=None: [{"article_id": 7, "abstract_text": f"{source} {split}"}],
    )
    assert arxiv.items("eval")[0].source == "someone/abstracts val[:1100]"
    assert arxiv.items("eval")[0].item_id == "7"


def test_an_explicit_hub_id_that_fails_raises_a_clear_error(no_hub) -> None:
    env = collabzoo.make("tldr", data="someone/tldr-copy")
    with pytest.raises(RuntimeError, match=r"could not load 'someone/tldr-copy'.*data='sample'"):
        env.reset(seed=0)


@pytest.mark.parametrize("task", TASKS)
def test_split_all_is_train_then_eval_with_ids_by_split(task: str) -> None:
    env = sample_env(task, split="all")
    train, held_out, every = env.items("train"), env.items("eval"), env.items()
    assert [i.source for i in every] == [i.source for i in [*train, *held_out]]
    expected = [f"train/{i.item_id}" for i in train] + [f"eval/{i.item_id}" for i in held_out]
    assert [i.item_id for i in every] == expected and len(set(expected)) == 12
    env.reset(options={"task": f"eval/{held_out[1].item_id}"})
    assert env.item.source == held_out[1].source
    with pytest.raises(ValueError, match=r"is not in split 'train' but in split 'all'"):
        env.reset(options={"task": expected[-1], "split": "train"})


# ----- data from files --------------------------------------------------------------------------
def test_the_embedded_sample_is_what_it_claims() -> None:
    tldr, arxiv = sample_env("tldr"), sample_env("arxiv")
    for env in (tldr, arxiv):
        assert [len(env.items(s)) for s in ("train", "eval")] == [8, 4]
    posts = [i.source for s in ("train", "eval") for i in tldr.items(s)]
    bodies = [p.partition("POST:")[2] for p in posts]
    assert all(120 <= len(b.split()) <= 300 for b in bodies)
    assert all("TL;DR" not in p for p in posts) and len(set(posts)) == 12
    assert all(i.reference for s in ("train", "eval") for i in tldr.items(s))
    raw = json.loads((writing.SAMPLE_DIR / "arxiv_sample.json").read_text(encoding="utf-8"))
    records = raw["train"] + raw["val"]
    assert all(r["token_count"] == len(r["abstract_text"].split()) for r in records)
    assert all(100 <= r["token_count"] <= 300 for r in records)
    ids = [i.item_id for s in ("train", "eval") for i in arxiv.items(s)]
    assert len(set(ids)) == 12 and ids[-1] == "sample-12"


def test_local_jsonl_is_one_list_with_the_last_fifth_held_out(tmp_path) -> None:
    path = tmp_path / "posts.jsonl"
    records = [
        {"prompt": f"POST: story number {n}.\n\nTL;DR:", "completion": "s"} for n in range(10)
    ]
    path.write_text("\n".join(json.dumps(r) for r in records), encoding="utf-8")
    env = collabzoo.make("tldr", data=str(path))
    assert [i.source for i in env.items("train")][-1] == "POST: story number 7."
    assert [i.source for i in env.items("eval")] == [
        "POST: story number 8.",
        "POST: story number 9.",
    ]
    _, infos = env.reset(seed=0, options={"split": "eval", "task": "1"})
    assert infos["concise"]["dataset"] == str(path) and infos["concise"]["task_id"] == "1"
    assert env.item.source == "POST: story number 9."


def test_local_json_with_one_list_per_split_and_a_split_mapping(tmp_path) -> None:
    def abstract(n):
        return {"article_id": f"a{n}", "abstract_text": f"Abstract {n}.", "token_count": 2}

    per_split = tmp_path / "abstracts.json"
    per_split.write_text(json.dumps({"train": [abstract(1)], "val": [abstract(2), abstract(3)]}))
    env = collabzoo.make("arxiv", data=per_split)
    assert [i.item_id for i in env.items("eval")] == ["a2", "a3"]
    ours = tmp_path / "ours.json"
    ours.write_text(json.dumps({"train": [abstract(4)], "eval": [abstract(5)]}))
    assert [i.item_id for i in collabzoo.make("arxiv", data=ours).items("eval")] == ["a5"]
    csv_path = tmp_path / "eval.csv"
    csv_path.write_text("article_id,abstract_text,token_count\nc1,Some text here.,3\n")
    mapped = collabzoo.make("arxiv", data={"train": str(per_split), "eval": str(csv_path)})
    assert [i.item_id for i in mapped.items("eval")] == ["c1"], "a mapped file is used whole"
    assert [i.item_id for i in mapped.items("train")] == ["a1"]
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"a": [abstract(1)], "b": [abstract(2)]}))
    with pytest.raises(ValueError, match="none of them for the 'eval' split"):
        collabzoo.make("arxiv", data=wrong).items("eval")
    missing = tmp_path / "missing.jsonl"
    missing.write_text(json.dumps({"abstract_text": "no id"}) + "\n")
    with pytest.raises(ValueError, match=r"lacks the field\(s\) \['article_id'\]"):
        collabzoo.make("arxiv", data=missing).items("train")


def test_bad_constructor_arguments_say_what_was_expected() -> None:
    with pytest.raises(ValueError, match="exactly the keys"):
        collabzoo.make("tldr", data={"train": "x.json"})
    with pytest.raises(TypeError, match="data must be"):
        collabzoo.make("tldr", data=3)
    with pytest.raises(ValueError, match="transitions"):
        collabzoo.make("tldr", transitions="regex")
    with pytest.raises(TypeError, match="single_agent"):
        collabzoo.make("arxiv", single_agent="yes")
    with pytest.raises(FileNotFoundError, match="neither an existing file"):
        collabzoo.make("tldr", data="./no/such/file.jsonl").items("train")


@pytest.mark.parametrize("task", TASKS)
def test_options_pick_the_task_by_index_or_id(task: str) -> None:
    env = sample_env(task)
    items = env.items("eval")
    last = env._item_id(items[-1])
    _, infos = env.reset(seed=3, options={"split": "eval", "task": len(items) - 1})
    assert infos[env.possible_agents[0]]["task_id"] == last
    _, infos = env.reset(seed=3, options={"split": "eval", "task": last})
    assert infos[env.possible_agents[0]]["task_id"] == last
    seen = {env.reset(seed=s)[1][env.possible_agents[0]]["task_id"] for s in range(30)}
    assert len(seen) > 1 and seen <= {env._item_id(i) for i in env.items("train")}
    with pytest.raises(ValueError, match="unknown task id"):
        env.reset(options={"task": "no-such-id"})
    assert (
        collabzoo.make("arxiv", data="sample").reset(options={"task": "sample-03"})[1][
            "background"
        ]["task_id"]
        == "sample-03"
    )


# ----- prompts, turns, feedback -----------------------------------------------------------------
@pytest.mark.parametrize("task", TASKS)
def test_role_prompts_hold_the_source_the_part_and_the_length_targets(task: str) -> None:
    env = sample_env(task, single_agent=False)
    obs, _ = env.reset(seed=0)
    source = env.item.source
    first, second = ROLES[task]
    assert all(source in o for o in obs.values())
    if task == "tldr":
        assert "Your part: the concise summary." in obs[first]
        assert "Your part: the detailed summary." in obs[second]
        assert "1.6 to 3.2 times" in obs[first] and "1.6 to 3.2 times" in obs[second]
        assert "8" in obs[first] and "256" in obs[second]
        assert "transition words" in obs[second] and "different words" in obs[second]
    else:
        assert "background and motivation" in obs[first]
        assert "methodology and implications" in obs[first], "told what the partner covers"
        assert "leave those out" in obs[first] and "leave those out" in obs[second]
        assert "128 to 256 words" in obs[first] and "1.3 to 1.6 times" in obs[second]
    solo, _ = sample_env(task, single_agent=True).reset(seed=0)
    assert SPLIT_MARKER in solo["writer"] and source in solo["writer"]


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("seed", [0, 7])
def test_whole_episode_is_deterministic(task: str, seed: int) -> None:
    first = play_episode(sample_env(task, horizon=3), seed, answer_seed=seed)
    second = play_episode(sample_env(task, horizon=3), seed, answer_seed=seed)
    assert len(first) == 4
    assert first == second
    final_observations = first[-1][0]
    assert all("Your team's score" in o for o in final_observations.values())


@pytest.mark.parametrize("task", TASKS)
def test_deep_copy_branches_independently(task: str) -> None:
    env, twin = sample_env(task, horizon=3), sample_env(task, horizon=3)
    team = scripted_team(task, "heuristic")
    env.reset(seed=5)
    twin.reset(seed=5)
    junk = {a: "nothing useful" for a in env.agents}
    env.step(junk)
    twin.step(junk)
    branch = copy.deepcopy(env)
    assert branch.items() is env.items(), "task data is shared, not copied"
    branch_step = branch.step(junk)
    branch.step(junk)
    assert branch.turn == 3 and env.turn == 1 and branch.agents == []
    assert env.state() == twin.state()
    good = team({a: env.observe(a) for a in env.agents})
    original_step = env.step(good)
    assert original_step == twin.step(good)
    assert original_step[1] != branch_step[1]
    assert next(iter(original_step[1].values())) >= 2.7


def test_turn_infos_report_words_characters_and_levels() -> None:
    env = sample_env("tldr")
    env.reset(seed=0)
    concise = "The poster asks how to handle a messy roommate politely."
    detailed = "Moreover, " + "the roommate never washes plates; however, " * 3 + "overall."
    _, rewards, terms, truncs, infos = env.step({"concise": concise, "detailed": detailed})
    expected = score_tldr(concise, detailed)
    assert rewards == {"concise": expected.total, "detailed": expected.total}
    assert all(terms.values()) and not any(truncs.values()) and env.agents == []
    assert infos["concise"]["parsed"] == {"words": 10, "characters": len(concise)}
    assert infos["detailed"]["parsed"] == {
        "words": len(detailed.split()),
        "characters": len(detailed),
    }
    parts = infos["detailed"]["reward_components"]
    assert set(parts) == {"structure", "coordination", "vocabulary", "transitions", "jaccard"}
    assert math.isclose(sum(parts.values()), expected.total)
    assert infos["concise"]["metrics"] == expected.metrics


@pytest.mark.parametrize("task", TASKS)
def test_single_agent_answer_is_split_at_the_marker(task: str) -> None:
    env = sample_env(task, single_agent=True)
    team = scripted_team(task, "heuristic")
    obs, _ = env.reset(seed=2)
    answer = team(obs)["writer"]
    first, _, second = answer.partition(SPLIT_MARKER)
    _, rewards, _, _, infos = env.step({"writer": answer})
    assert rewards["writer"] == SCORERS[task](first.strip(), second.strip()).total >= 2.7
    parsed = infos["writer"]["parsed"]
    assert parsed["marker_found"] is True
    assert parsed[ROLES[task][1]]["words"] == len(second.split())
    env.reset(seed=2)
    _, rewards, _, _, infos = env.step({"writer": answer.replace(SPLIT_MARKER, " ")})
    assert infos["writer"]["parsed"]["marker_found"] is False
    assert infos["writer"]["parsed"][ROLES[task][1]] == {"words": 0, "characters": 0}
    assert rewards["writer"] == 0.0, "without the marker, part two is empty: level 1 fails"


def test_horizon_gives_score_feedback_with_own_history_only() -> None:
    env = sample_env("tldr", horizon=2)
    env.reset(seed=1)
    concise = "My neighbour's husky barks all day while they are at work, what should I do?"
    detailed = concise.replace("husky", "dog")  # as long as the concise: ratio about 1
    obs, rewards, terms, *_ = env.step({"concise": concise, "detailed": detailed})
    assert not any(terms.values()) and rewards["concise"] == 0.5
    for agent, own, other in (("concise", concise, detailed), ("detailed", detailed, concise)):
        seen = obs[agent]
        assert f"=== Turn 1: your answer ===\n{own}" in seen
        assert other not in seen, "agents never see each other's texts"
        assert "Your team's score: 0.50 of 3.00 (1 of 4 levels reached)." in seen
        assert "Level 1 (length)" in seen and ": +0.50 of 0.50." in seen
        assert "Level 2 (detailed is 1.6-3.2x the concise length)" in seen
        assert (
            "not met, so scoring stopped here." in seen and "Level 4 (style): not scored." in seen
        )
        assert seen.rstrip().endswith("Answer with the revised text only.")
    assert "Make your detailed summary longer." in obs["detailed"]
    assert "Make your concise summary shorter." in obs["concise"]
    team = scripted_team("tldr", "heuristic")
    _, rewards, terms, _, _ = env.step(team(obs))
    assert all(terms.values()) and rewards["concise"] >= 2.7, "the role prompt stays in view"


def test_feedback_names_the_next_thing_to_fix() -> None:
    env = sample_env("arxiv", horizon=2)
    env.reset(seed=0)
    obs, *_ = env.step({"background": "Too short.", "methodology": "word " * 200})
    assert "Give your background and motivation 128 to 256 words (it had 2)." in obs["background"]
    assert "Your partner's text was out of the length range" in obs["methodology"]
    solo = sample_env("tldr", single_agent=True, horizon=2)
    solo.reset(seed=0)
    obs, *_ = solo.step({"writer": "no marker here"})
    assert "Give the concise summary 8 to 256 words (it had 3)." in obs["writer"]
    assert "Give the detailed summary 8 to 256 words (it had 0)." in obs["writer"]
    assert f"then a line {SPLIT_MARKER}" in obs["writer"]


@pytest.mark.parametrize("task", TASKS)
def test_render_shows_source_texts_and_levels(task: str) -> None:
    env = sample_env(task, render_mode="ansi")
    obs, _ = env.reset(seed=4)
    before = env.render()
    assert env.item.source[:100] in before and "after turn 0 of 1" in before
    answers = scripted_team(task, "heuristic")(obs)
    env.step(answers)
    after = env.render()
    assert all(text in after for text in answers.values())
    assert "score 2.980 / 3" in after and "levels 4/4" in after and "Level 4 (style)" in after
    source_shown = after.split("--- ")[1]
    assert len(source_shown) < writing.SOURCE_SHOWN_CHARS + 60, "a long source is truncated"
    assert f"[{len(env.item.source)} chars]" in source_shown


def test_reward_variants_pass_through() -> None:
    reference, strict = sample_env("tldr"), sample_env("tldr", transitions="words")
    concise = "The roommate leaves dirty dishes in the sink every single day."
    detailed = (
        "Evidently the roommate's different habits leave dirty dishes, pots and plates piled in "
        "the kitchen sink for days, attracting flies and arguments about fairness and chores."
    )
    for env in (reference, strict):
        env.reset(seed=0)
    ref = reference.step({"concise": concise, "detailed": detailed})[4]["concise"]["metrics"]
    words = strict.step({"concise": concise, "detailed": detailed})[4]["concise"]["metrics"]
    assert ref["transition_categories"] > words["transition_categories"]


# ----- scripted teams -------------------------------------------------------------------------
@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("single_agent", [False, True])
def test_heuristic_team_scores_near_the_maximum_and_naive_far_below(
    task: str, single_agent: bool
) -> None:
    env = sample_env(task, single_agent=single_agent)
    for options in every_item(env):
        finals = {}
        for kind in ("heuristic", "naive"):
            obs, _ = env.reset(seed=0, options=options)
            _, rewards, *_ = env.step(scripted_team(task, kind)(obs))
            finals[kind] = next(iter(rewards.values()))
        assert finals["heuristic"] >= 2.7, (options, finals)
        assert finals["naive"] < finals["heuristic"] - 2.0, (options, finals)


@pytest.mark.parametrize("task", TASKS)
def test_heuristic_texts_hold_up_on_reshuffled_sources_of_other_lengths(task: str) -> None:
    """Sources the sample does not have: sentences of several items, shuffled, cut to 60-300
    words (TLDR posts keep their 'POST:' label)."""
    from collabzoo.envs.scripted_teams import (
        _sentences,
        arxiv_heuristic_texts,
        tldr_heuristic_texts,
    )

    env = sample_env(task)
    sources = [i.source.partition("POST:")[2] or i.source for i in env.items("train")]
    rng = random.Random(11)
    texts = tldr_heuristic_texts if task == "tldr" else arxiv_heuristic_texts
    for _ in range(60):
        sentences = _sentences(rng.choice(sources)) + _sentences(rng.choice(sources))
        rng.shuffle(sentences)
        words = " ".join(sentences).split()[: rng.randint(60, 300)]
        source = ("POST: " if task == "tldr" else "") + " ".join(words)
        assert SCORERS[task](*texts(source)).total >= 2.97, source


def test_fixed_heuristic_phrases_cover_all_transition_categories() -> None:
    assert transition_categories(TLDR_CLOSING) == 12
    arxiv_frames = ARXIV_BACKGROUND_OPEN + ARXIV_BACKGROUND_CLOSE
    assert transition_categories(arxiv_frames + ARXIV_METHOD_OPEN + ARXIV_METHOD_CLOSE) == 12


def test_scripted_team_errors_list_what_exists() -> None:
    # The message lists every team with its games, read from the registry: a new game's team
    # must show up in it, so the expectation is built from `listed_games`, not a literal.
    heuristic_games = ", ".join(listed_games("heuristic"))
    assert {"arxiv", "tldr"} <= set(listed_games("heuristic"))
    with pytest.raises(ValueError, match=re.escape(f"heuristic: {heuristic_games};")):
        scripted_team("tldr", "oracle")
    with pytest.raises(ValueError, match="no 'Your part"):
        scripted_team("tldr", "heuristic")({"concise": "--- post ---\nhi\n--- end of post ---"})
