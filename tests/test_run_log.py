"""RunLogger's metrics.jsonl, TensorBoard and progress bar; read_metrics; `collabzoo plot`."""

from __future__ import annotations

import json
import math
import sys
import warnings

import pytest

from collabzoo.algos.runtime.run_log import RunLogger, read_metrics
from collabzoo.cli import main
from tests.optional import require_module

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def lines_of(path):
    return (path / "metrics.jsonl").read_text(encoding="utf-8").splitlines()


def quiet_logger(path, **kwargs):
    return RunLogger(path, tensorboard=False, progress=False, **kwargs)


# ----- metrics.jsonl --------------------------------------------------------------------------
def test_each_log_call_is_one_json_line_with_update_metrics_and_time(tmp_path):
    with quiet_logger(tmp_path) as logger:
        logger.log(0, {"mean_return": 0.25, "loss": 1.5})
        # flushed at once: readable before close
        assert json.loads(lines_of(tmp_path)[0])["mean_return"] == 0.25
        logger.log(1, {"mean_return": 0.5, "steps": 7})
    first, second = (json.loads(line) for line in lines_of(tmp_path))
    assert list(first) == ["update", "mean_return", "loss", "time"]
    assert first["update"] == 0 and first["loss"] == 1.5
    assert second == {"update": 1, "mean_return": 0.5, "steps": 7, "time": second["time"]}
    assert 0 <= first["time"] <= second["time"] < 60


def test_nan_and_infinity_are_written_as_null(tmp_path):
    import numpy  # a core dependency: never skipped

    with quiet_logger(tmp_path) as logger:
        logger.log(3, {"loss": math.nan, "kl": math.inf, "gain": -math.inf, "n": numpy.float32(2)})
    line = lines_of(tmp_path)[0]
    assert "NaN" not in line and "Infinity" not in line
    record = json.loads(line)  # strict JSON
    assert record["loss"] is None and record["kl"] is None and record["gain"] is None
    assert record["n"] == 2.0


def test_reserved_keys_and_non_numbers_are_refused(tmp_path):
    with quiet_logger(tmp_path) as logger:
        with pytest.raises(ValueError, match="time"):
            logger.log(0, {"time": 1.0})
        with pytest.raises(TypeError, match="samples"):
            logger.log(0, {"samples": [1, 2]})
    assert not lines_of(tmp_path)


def test_a_resumed_run_appends_and_keeps_the_earlier_lines(tmp_path):
    with quiet_logger(tmp_path) as logger:
        logger.log(0, {"mean_return": 0.1})
        logger.log(1, {"mean_return": 0.2})
    with quiet_logger(tmp_path) as logger:
        logger.log(2, {"mean_return": 0.3})
    assert [r["update"] for r in read_metrics(tmp_path)] == [0, 1, 2]
    assert [r["mean_return"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [0.1, 0.2, 0.3]


def test_a_truncated_last_line_is_skipped_and_cut_before_resuming(tmp_path):
    with quiet_logger(tmp_path) as logger:
        logger.log(0, {"mean_return": 0.1})
        logger.log(1, {"mean_return": 0.2})
    path = tmp_path / "metrics.jsonl"
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"update": 2, "mean_ret')  # killed mid-write
    assert [r["update"] for r in read_metrics(tmp_path)] == [0, 1]

    with quiet_logger(tmp_path) as logger:  # the resumed run starts on a fresh line
        logger.log(2, {"mean_return": 0.3})
    assert [r["update"] for r in read_metrics(tmp_path)] == [0, 1, 2]
    assert all(isinstance(json.loads(line), dict) for line in lines_of(tmp_path))


def test_a_bad_line_before_the_last_is_an_error(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"update": 0}\nnot json\n{"update": 1}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="line 2"):
        read_metrics(path)
    with pytest.raises(FileNotFoundError):
        read_metrics(tmp_path / "missing")


def test_drop_rewound_keeps_the_branch_of_a_run_resumed_from_an_earlier_checkpoint(tmp_path):
    path = tmp_path / "metrics.jsonl"
    updates = [0, 1, 2, 3, 4, 2, 3]  # killed after 4, resumed from the checkpoint at 1
    path.write_text(
        "".join(json.dumps({"update": u, "v": i}) + "\n" for i, u in enumerate(updates))
    )
    assert [r["update"] for r in read_metrics(path)] == updates
    latest = read_metrics(path, drop_rewound=True)
    assert [(r["update"], r["v"]) for r in latest] == [(0, 0), (1, 1), (2, 5), (3, 6)]


def test_closing_twice_is_fine_and_logging_after_close_is_refused(tmp_path):
    logger = quiet_logger(tmp_path)
    logger.log(0, {"mean_return": 1.0})
    logger.close()
    logger.close()
    assert logger.closed
    with pytest.raises(RuntimeError, match="closed"):
        logger.log(1, {"mean_return": 1.0})
    assert len(lines_of(tmp_path)) == 1


# ----- TensorBoard, wandb, the progress bar -----------------------------------------------------
def test_tensorboard_event_file_holds_the_scalars(tmp_path):
    require_module("tensorboard", "train")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with RunLogger(tmp_path, progress=False) as logger:
        logger.log(0, {"mean_return": 0.5, "loss": math.nan})
        logger.log(1, {"mean_return": 0.75})
    events = list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
    assert len(events) == 1 and events[0].stat().st_size > 0
    accumulator = EventAccumulator(str(tmp_path / "tensorboard"))
    accumulator.Reload()
    scalars = accumulator.Scalars("mean_return")
    assert [(s.step, s.value) for s in scalars] == [(0, 0.5), (1, 0.75)]


def test_without_tensorboard_it_warns_once_and_goes_on(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import now fails
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with RunLogger(tmp_path, progress=False) as logger:
            logger.log(0, {"mean_return": 0.5})
            logger.log(1, {"mean_return": 0.5})
    assert len([w for w in caught if "TensorBoard" in str(w.message)]) == 1
    assert len(lines_of(tmp_path)) == 2
    assert not (tmp_path / "tensorboard").exists()


def test_wandb_asked_for_but_missing_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(ImportError, match="pip install wandb"):
        RunLogger(tmp_path, wandb={"project": "x"}, tensorboard=False, progress=False)


def test_wandb_gets_the_metrics_at_the_update_step(tmp_path, monkeypatch):
    calls = []

    class FakeRun:
        def log(self, data, step):
            calls.append(("log", data, step))

        def finish(self):
            calls.append(("finish",))

    class FakeWandb:
        @staticmethod
        def init(**kwargs):
            calls.append(("init", kwargs))
            return FakeRun()

    monkeypatch.setitem(sys.modules, "wandb", FakeWandb)
    with RunLogger(tmp_path, wandb={"project": "p"}, tensorboard=False, progress=False) as logger:
        logger.log(4, {"mean_return": 0.5})
    assert calls == [
        ("init", {"project": "p", "dir": str(tmp_path)}),
        ("log", {"mean_return": 0.5}, 4),
        ("finish",),
    ]


def test_progress_bar_counts_updates_and_shows_mean_return_and_loss(tmp_path, capsys):
    require_module("tqdm", "train")
    with RunLogger(tmp_path, tensorboard=False, total_updates=3) as logger:
        logger.log(0, {"mean_return": 0.125, "loss": 2.5})
        logger.log(1, {"mean_return": 0.375, "loss": 1.25})
    err = capsys.readouterr().err
    assert "2/3" in err
    assert "mean_return=0.375" in err and "loss=1.25" in err


# ----- collabzoo plot ------------------------------------------------------------------------
def write_run(path, returns, **extra):
    with quiet_logger(path) as logger:
        for update, value in enumerate(returns):
            logger.log(update, {"mean_return": value, **extra})
    return path


def test_plot_writes_a_png_of_two_runs_and_prints_first_last_best(tmp_path, capsys):
    require_module("matplotlib", "train")
    first = write_run(tmp_path / "magrpo", [0.1, 0.6, 0.4])
    second = write_run(tmp_path / "iac", [0.2, 0.3, math.nan, 0.5])
    assert main(["plot", str(first), str(second / "metrics.jsonl")]) == 0
    out = capsys.readouterr().out.splitlines()
    png = first / "curves.png"
    assert out[0] == str(png)
    assert png.read_bytes()[:8] == PNG_SIGNATURE
    rows = {line.split()[0]: line.split()[1:] for line in out[3:]}
    assert rows["magrpo"] == ["3", "0.100", "0.400", "0.600"]
    assert rows["iac"] == ["3", "0.200", "0.500", "0.500"]  # the NaN point is left out

    output = tmp_path / "out" / "loss.png"
    write_run(tmp_path / "third", [0.0, 0.0], loss=3.0)
    assert main(["plot", str(tmp_path / "third"), "--metric", "loss", "--output", str(output)]) == 0
    assert "best (min)" in capsys.readouterr().out
    assert output.read_bytes()[:8] == PNG_SIGNATURE


def test_plot_unknown_metric_lists_the_metrics_present(tmp_path, capsys):
    run = write_run(tmp_path / "run", [0.1], loss=1.0)
    assert main(["plot", str(run), "--metric", "reward"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("collabzoo: error:")
    assert "'reward'" in err and "mean_return" in err and "loss" in err
    assert not (run / "curves.png").exists()


def test_plot_missing_run_is_a_clear_error(tmp_path, capsys):
    assert main(["plot", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("collabzoo: error:") and "nowhere" in err
    (tmp_path / "empty").mkdir()
    assert main(["plot", str(tmp_path / "empty")]) == 2
    assert "has no metrics.jsonl" in capsys.readouterr().err
