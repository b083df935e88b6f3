"""Issue 34 item 6, the pure half: a pattern runs line by line on lines cut to MAX_LINE characters,
and a command's format specs cannot ask for gigabytes (a stored `{nproc:>2000000000}` did). The
deadline on a pattern that backtracks is tested with real processes in
tests/integration/test_shared_machine.py."""
from __future__ import annotations

import optuna
import pytest

from autotune.cli import main
from autotune.config import Config
from autotune.errors import WorkloadError
from autotune.measure.script import MAX_LINE, last_match_end, metric_values
from autotune.script.template import fill, placeholders
from autotune.study.attrs import SCRIPT_COMMAND
from results_study import sha256, study_copy


def test_a_pattern_sees_each_line_cut_to_a_fixed_length():
    long = "x" * (MAX_LINE - 20) + "throughput: 12 throughput: 13" + "y" * (4 << 20)
    assert metric_values(long + "\nthroughput: 7\n", r"throughput: (\d+)") == [12.0, 7.0]
    # a pattern no longer spans lines: the work is per line, whatever the output holds
    assert metric_values("throughput:\n 5\n", r"throughput:\s+(\d+)") == []
    text = "a: 1\nb\na: 2 tail\nend\n"
    assert text[last_match_end(text, r"a: (\d)"):] == " tail\nend\n"
    assert last_match_end(text, "nothing") is None


@pytest.mark.parametrize("arg", ["{nproc:>2000000000}", "--x={threads:.999999999}",
                                 "{nproc:{seed}}", "{seed:0>100}", "{nproc:_>65}"])
def test_a_huge_width_or_precision_is_refused_before_any_text_is_made(arg):
    for check in (lambda: placeholders(("python", arg)), lambda: fill(("python", arg), Config())):
        with pytest.raises(WorkloadError, match="widths and precisions above 64"):
            check()


def test_small_format_specs_still_fill():
    assert fill(("{nproc:>3}", "{nproc:0>3}", "{seed:x<4}"), Config(), seed=7) == (
        "  1", "001", "7xxx")


def test_a_stored_placeholder_with_a_huge_width_is_one_line_exit_2(tmp_path, capsys):
    """The study is data: export fills the stored command, and used to allocate 2 GB for it."""
    db = study_copy(tmp_path)
    study = optuna.load_study(study_name=optuna.get_all_study_names(f"sqlite:///{db}")[0],
                              storage=f"sqlite:///{db}")
    study.set_user_attr(SCRIPT_COMMAND, ["python", "train.py", "--n", "{nproc:>2000000000}"])
    del study
    before = sha256(db)
    assert main(["export", "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "widths and precisions above 64" in err[0], err
    assert sha256(db) == before
