"""Two evaluation summaries side by side (base vs trained): a markdown table and the solve-count histograms.

python -m propel.pipeline.compare runs/eval/math/base runs/eval/math/trained runs/eval/math
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from propel.lit_modules.evaluation import SUMMARY
from propel.pipeline.report import markdown_table, plot_histograms

COMPARED = (
    "tasks",
    "valid_rate",
    "utility",
    "utility_all",
    "self_bleu_3",
    "distinct_3",
    "top_topic_rate",
    "solve_count_hist",
)


def compare(
    base: Mapping,
    trained: Mapping,
    output_dir: str | Path | None = None,
    names: tuple[str, str] = ("base", "trained"),
) -> str:
    """Markdown table of two evaluation summaries side by side; with ``output_dir`` also writes ``compare.md`` and
    ``solve_counts.png`` (the two solve-count histograms) there."""
    rows = [{"metric": key, names[0]: base.get(key), names[1]: trained.get(key)} for key in COMPARED]
    table = markdown_table(rows, ["metric", *names])
    if output_dir is not None:
        out = Path(output_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "compare.md").write_text(table)
        hists = {names[0]: base["solve_count_hist"], names[1]: trained["solve_count_hist"]}
        plot_histograms(hists, out / "solve_counts.png", title=f"solve count of {base.get('n_trials', '')} trials")
    return table


def compare_dirs(base_dir: str | Path, trained_dir: str | Path, output_dir: str | Path) -> str:
    """``compare`` of the ``summary.json`` files two ``propel test`` runs wrote."""
    base = json.loads((Path(base_dir) / SUMMARY).read_text())
    trained = json.loads((Path(trained_dir) / SUMMARY).read_text())
    return compare(base, trained, output_dir)


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 4:
        raise SystemExit("usage: python -m propel.pipeline.compare BASE_EVAL_DIR TRAINED_EVAL_DIR OUTPUT_DIR")
    print(compare_dirs(*sys.argv[1:]))
