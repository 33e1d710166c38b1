"""Time from ``propel ...`` to its answer (the target: help and config errors in under 2 s), each command run
``--repeats`` times in a fresh process; median and range of wall time. The last row is the reference: a valid
config printed in full, which needs Lightning and the classes imported (what every config error cost before keys
were checked from the source, ``propel.cli.static_keys``). The nested rows are a key inside a dataclass argument
(``--model.init_args.loss.betaa``) and one inside a fragment file a config names (``domain: domain.yaml``), written
to a temporary folder.

python benchmarks/cli_startup.py --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
GRPO = ["-c", "configs/grpo/base.yaml", "-c", "configs/math/grpo.yaml"]
COMMANDS = {
    "propel --help": ["--help"],
    "fit: misspelled model key": ["fit", *GRPO, "--model.init_args.lrr", "1"],
    "fit: misspelled trainer key": ["fit", *GRPO, "--trainer.max_stepz", "3"],
    "fit: misspelled nested key (--model.init_args.loss.betaa)": ["fit", *GRPO, "--model.init_args.loss.betaa", "1"],
    "fit: misspelled key in a fragment (domain.yaml)": ["fit", *GRPO, "-c", "{tmp}/overlay.yaml"],
    "predict: misspelled data key": ["predict", "-c", "configs/math/label.yaml", "--data.init_args.n_taks", "3"],
    "pipeline: misspelled stage key": ["pipeline", "-c", "configs/demo.yaml", "grpo.model.init_args.lrr=1"],
    "fit: missing config file": ["fit", "-c", "configs/nope.yaml"],
    "reference: fit --print_config (valid)": ["fit", *GRPO, "--print_config"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    table = Table(title=f"propel startup, {args.repeats} runs each (wall seconds)")
    for column in ("command", "exit", "median s", "min s", "max s"):
        table.add_column(column)
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        (tmp / "overlay.yaml").write_text("data:\n  init_args:\n    domain: domain.yaml\n")
        (tmp / "domain.yaml").write_text("class_path: propel.domains.MathExpressionDomain\ninit_args:\n  seedd: 1\n")
        for name, argv in COMMANDS.items():
            argv = [a.format(tmp=tmp) for a in argv]
            times, code = [], None
            for _ in range(args.repeats):
                start = time.perf_counter()
                out = subprocess.run([sys.executable, "-m", "propel.cli", *argv], capture_output=True, cwd=ROOT)
                times.append(time.perf_counter() - start)
                code = out.returncode
            row = (f"{statistics.median(times):.2f}", f"{min(times):.2f}", f"{max(times):.2f}")
            table.add_row(name, str(code), *row)
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
