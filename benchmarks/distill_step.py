"""Step time of the turn-targeted distillation loss vs a whole-sequence distillation loss, on the same trajectories.

Both run the bundled model with LoRA (teacher: the live policy under no-grad, the hint as a system message; forward
KL; one forward + backward of the student). Turn-targeted: the student's context ends with the targeted turn (the
middle one) and only that turn's tokens are in the loss. Whole-sequence: the whole episode, the hint at the top of
the teacher's context, every assistant token in the loss (what sequence-level on-policy distillation weights).
Episodes are built token-exact from the chat template: ``--turns`` assistant turns of ``--turn-tokens`` tokens, each
followed by a tool observation of ``--obs-tokens`` tokens.

    .venv/bin/python benchmarks/distill_step.py
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch
from rich.console import Console
from rich.table import Table


def episodes(tokenizer, n: int, turns: int, turn_tokens: int, obs_tokens: int, seed: int = 0):
    from propel.records import Context, Prompt, Sample, Turn
    from propel.rollouts.conversation import Conversation

    g = torch.Generator().manual_seed(seed)
    words = ["apple", "river", "stone", "cloud", "write", "file", "echo", "test", "data", "ok"]

    def text(k):
        return " ".join(words[int(i)] for i in torch.randint(len(words), (k,), generator=g))

    out = []
    for i in range(n):
        opening = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": text(40)}]
        conv = Conversation(tokenizer, opening)
        s = Sample(conv.text, "", context=Context(f"e{i}", Prompt(messages=opening)), prompt_ids=list(conv.ids))
        for _ in range(turns):
            ids = tokenizer(text(turn_tokens), add_special_tokens=False)["input_ids"][:turn_tokens]
            ids.append(tokenizer.eos_token_id)
            s.turns.append(Turn("assistant", conv.add_assistant(ids, {tokenizer.eos_token_id}), ids))
            obs = text(obs_tokens)
            s.turns.append(Turn("tool", obs, conv.add_message("tool", obs), trainable=False))
        out.append(s)
    return out


def main() -> None:
    from propel.lit_modules.distill import TurnKLDistillModule
    from propel.losses.distillation import DivergenceSpec, masked_mean, token_divergence
    from propel.rollouts.hints import FunctionHints, Hint

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--turn-tokens", type=int, default=32)
    parser.add_argument("--obs-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    hint = "Answer with exactly one tool call."
    module = TurnKLDistillModule(hints=FunctionHints(lambda s: [Hint(args.turns // 2, hint)]))
    module.configure_model()
    samples = episodes(module.tokenizer, args.episodes, args.turns, args.turn_tokens, args.obs_tokens)
    spec = DivergenceSpec("forward_kl")

    targets = module.turn_term.targets(samples)
    turn_rows = ([t.student_ids for t in targets], [t.teacher_ids for t in targets], [t.length for t in targets])
    turn_mask = module.turn_term.mask(turn_rows[2])
    whole_student = [s.prompt_ids + s.response_ids for s in samples]
    head = module.turn_term.splicer.message_ids(hint)  # the hint right after the whole conversation's first message
    whole_teacher, lengths, masks = [], [], []
    for s, ids in zip(samples, whole_student, strict=True):
        cut = ids.index(module.tokenizer.convert_tokens_to_ids("<|im_start|>"), 1)  # after the system message
        whole_teacher.append(ids[:cut] + head + ids[cut:])
        lengths.append(len(s.response_ids))
        masks.append([float(t.trainable) for t in s.turns for _ in t.token_ids])
    width = max(lengths)
    whole_mask = torch.tensor([m + [0.0] * (width - len(m)) for m in masks])

    def step(student_rows, teacher_rows, lens, mask) -> float:
        start = time.perf_counter()
        with module.eval_mode():
            with torch.no_grad():
                teacher = module.turn_term.turn_logits(teacher_rows, lens, "teacher")
            student = module.turn_term.turn_logits(student_rows, lens, "student")
        loss = masked_mean(token_divergence(student, teacher, spec), mask)
        loss.backward()
        module.policy.zero_grad(set_to_none=True)
        return time.perf_counter() - start

    cases = {
        "turn-targeted (turn t only)": (turn_rows[0], turn_rows[1], turn_rows[2], turn_mask),
        "whole sequence (all assistant turns)": (whole_student, whole_teacher, lengths, whole_mask),
    }
    results = {}
    for name, case in cases.items():
        step(*case)  # warm-up
        results[name] = [step(*case) for _ in range(args.repeats)]
    table = Table(title=f"Distillation step, {args.episodes} episodes x {args.turns} turns "
                        f"({args.turn_tokens} + {args.obs_tokens} tokens each), SmolLM2-135M + LoRA, CPU, "
                        f"{args.repeats} repeats")  # fmt: skip
    for col in ("loss", "tokens in loss", "longest input", "seconds / step (95% CI)", "relative"):
        table.add_column(col, justify="right")
    base = statistics.fmean(results["whole sequence (all assistant turns)"])
    for name, (student_rows, _, _, mask) in cases.items():
        times = results[name]
        ci = 1.96 * statistics.stdev(times) / math.sqrt(len(times)) if len(times) > 1 else 0.0
        mean = statistics.fmean(times)
        longest = str(max(map(len, student_rows)))
        table.add_row(name, str(int(mask.sum())), longest, f"{mean:.2f} ± {ci:.2f}", f"{mean / base:.2f}x")
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
