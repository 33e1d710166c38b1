"""Recount the hint probes' replies (probe3.txt: bare rules; probe4.txt: rules with an example reply): per hint
variant, replies carrying the team's tag (any case), replies with the right sum (the sum as a substring, as the
probe printed it) and, without a hint, replies that copy the previous conflict turn's tag [maple]."""

import ast
import json
import re
import sys
from pathlib import Path

here = Path(__file__).parent
out = {}
for name in ("probe3", "probe4"):
    for line in (here / f"{name}.txt").read_text().splitlines():
        if line.startswith("gen "):
            continue
        variant, answer = re.match(r"^(.*?) (\d+) cedar", line).groups()
        replies = ast.literal_eval(line[line.index("[") :])
        row = out.setdefault(f"{name}/{variant}", {"replies": 0, "tag": 0, "sum_right": 0, "maple": 0})
        row["replies"] += len(replies)
        row["tag"] += sum("[cedar]" in r.lower() for r in replies)
        row["sum_right"] += sum(answer in r for r in replies)
        row["maple"] += sum("[maple]" in r.lower() for r in replies)
json.dump(out, sys.stdout, indent=1)
