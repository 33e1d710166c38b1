"""Base vs trained evaluation summaries side by side."""

from propel.pipeline.compare import compare
from propel.pools.summary import evaluation_summary


def test_compare_writes_table_and_plot(tmp_path):
    base = evaluation_summary([True, False], [0, None], ["a b c d", None], ["t", None], 2, (1, 1))
    trained = evaluation_summary([True, True], [1, 1], ["a b c", "d e f"], ["t", "u"], 2, (1, 1))
    table = compare(base, trained, tmp_path)
    assert "| utility | 0 | 1 |" in table and "| solve_count_hist | [1, 0, 0] | [0, 2, 0] |" in table
    assert (tmp_path / "compare.md").read_text() == table
    assert (tmp_path / "solve_counts.png").stat().st_size > 1000
