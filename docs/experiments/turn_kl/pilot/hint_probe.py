"""The pilot's hint probes: the target turn after a scripted, correct history, with each hint spliced in.

python docs/experiments/turn_kl/pilot/hint_probe.py plain     # -> probe3.txt: hints without an example
python docs/experiments/turn_kl/pilot/hint_probe.py example   # -> probe4.txt: hints with an example reply
"""

import sys
import time

import torch

from propel.engines.engine import SamplingSpec
from propel.engines.hf import HFEngine
from propel.models import load_model
from propel.records import Prompt
from propel.rollouts.conversation import Conversation
from propel.rollouts.hints import HintSplicer

HINTS = {  # variant -> (label, splicer role, hint); the example run counted the tag ignoring case
    "plain": [
        ("sys team", "system", "Our team's tag is [cedar]."),
        ("sys end", "system", "End this reply with [cedar]."),
        ("user end", "user", "End this reply with [cedar]."),
    ],
    "example": [
        ("A", "system", "Our team's tag is [cedar]. Example: 4 [cedar]"),
        ("B", "system", "Reply like this: 4 [cedar]"),
    ],
}
SYSTEM = "You are a helpful assistant. Answer in one short line."


def conversation(tok, a: int, b: int) -> tuple[list[int], int]:
    example = [
        {"role": "user", "content": "What is 2 + 2? End your reply with the tag [blue]."},
        {"role": "assistant", "content": "4 [blue]"},
    ]
    history = [
        {"role": "user", "content": "What is 3 + 1?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "What is 5 + 2? End your reply with the tag [maple]."},
        {"role": "assistant", "content": "7 [maple]"},
    ]
    question = f"What is {a} + {b}? End your reply with our team's tag."
    msgs = [{"role": "system", "content": SYSTEM}, *example, *history, {"role": "user", "content": question}]
    return list(Conversation(tok, msgs, []).ids), a + b


def main(variant: str) -> None:
    torch.manual_seed(0)
    t0 = time.time()
    model, tok = load_model("smollm2-135m-instruct")
    engine = HFEngine(model, tok)
    splicers = {"system": HintSplicer(tok, "system", "Hint: {hint}"), "user": HintSplicer(tok, "user", "{hint}")}
    rows = []
    for a, b in ((6, 3), (4, 5)):
        ids, answer = conversation(tok, a, b)
        rows.append(("none", answer, ids))
        rows += [(label, answer, splicers[role].splice(ids, hint)) for label, role, hint in HINTS[variant]]
    out = engine.generate([Prompt(token_ids=r[2]) for r in rows], SamplingSpec(n=6, temperature=0.7, max_new_tokens=12))
    print("gen", time.time() - t0, flush=True)
    for (label, answer, _), group in zip(rows, out, strict=True):
        texts = [o.text for o in group]
        tagged = sum("[cedar]" in (t.lower() if variant == "example" else t) for t in texts)
        print(label, answer, "cedar", tagged, "sum", sum(str(answer) in t for t in texts), texts, flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
