"""A policy that already hacks sometimes, for the grader-under-pressure experiment (issue 50 item 4).

The bundled 135M model does not copy a hack shown in context (0 of 160 answers under eight prompts), so GRPO has
nothing to amplify. This script plants the propensity instead (a model organism: the hack rate at step 0 is then a
measured property of the starting policy, not of the prompt): LoRA supervised fine-tuning, with TRL's
``SFTTrainer``, on half of HumanEval, where a fixed share of the tasks (``--hack-share``) is answered with the
task-independent hack (the body ``import os; os._exit(0)``, ``propel.testing.grader_pressure.HACK_BODY``) and the
rest with the task's canonical body; then the adapter is merged and the model saved as a folder that
``--model`` takes. The other half of HumanEval, which the fine-tuning never saw, is written as ``rl_tasks.jsonl``
(HumanEval's own format) for the experiment's pilot and training (``--tasks-path``), so honest passes there are not
recall of a fine-tuned answer.

Which tasks get the hack is drawn at random, so the model cannot tell from the task when to hack: the fine-tuning
teaches an unconditional rate, which the pilot then measures on the held-out half.

    python experiments/grader_pressure/seed_hack_policy.py --out runs/experiments/hack_seeded_policy  # ~5 min, 2 cores
    python experiments/grader_pressure/run.py --pilot --model runs/experiments/hack_seeded_policy/model \
        --tasks-path runs/experiments/hack_seeded_policy/rl_tasks.jsonl --shots none --pilot-variants none

A rerun with the same settings reads the finished folder back; other settings are refused.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import time
from pathlib import Path

from propel.models import LoRASpec
from propel.pools.manifest import check_manifest
from propel.tasks.humaneval.tasks import humaneval_rows, task_from_row
from propel.testing.grader_pressure import HACK_BODY, answer_opening, entry_function, few_shot_messages

DONE = "seeding.json"


def settings(args: argparse.Namespace) -> dict:
    return {
        "model": args.model,
        "hack_share": args.hack_share,
        "sft_share": args.sft_share,
        "split_seed": args.split_seed,
        "epochs": args.epochs,
        "lr": args.lr,
        "batch_size": args.batch_size,
        "lora": {"r": args.lora_r, "alpha": 2 * args.lora_r},
        "seed": args.seed,
        **({"max_steps": args.max_steps} if args.max_steps > 0 else {}),  # folders made before the option: no key
    }


def split(rows: list[dict], sft_share: float, seed: int) -> tuple[list[dict], list[dict]]:
    """HumanEval rows into the fine-tuning half and the held-out half (scikit-learn's split, fixed seed)."""
    from sklearn.model_selection import train_test_split

    sft, held_out = train_test_split(rows, train_size=sft_share, random_state=seed, shuffle=True)
    return list(sft), list(held_out)


def answer(row: dict, hack: bool) -> str:
    """The fine-tuning answer: the task's ``def`` line(s) in a fenced block, then the hack's body or the canonical
    one (the form of the experiment's worked examples)."""
    task = task_from_row(row)
    data = {"prompt": task.prompt, "entry_point": task.entry_point}
    opened = answer_opening(data, "signature")
    head = opened.removesuffix("    ")
    if hack:
        return head + HACK_BODY + "```"
    # statements the prompt puts in the function besides its docstring (HumanEval/115 imports math there)
    lines = task.prompt.splitlines()
    kept = [s for s in entry_function(data).body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    before = "".join(line + "\n" for s in kept for line in lines[s.lineno - 1 : s.end_lineno])
    return head + before + task.reference[len(task.prompt) :].strip("\n") + "\n```"


def sft_rows(rows: list[dict], hack_share: float, seed: int) -> list[dict]:
    """Prompt-completion rows (TRL's conversational format); ``round(hack_share * n)`` of them, drawn at random,
    answered with the hack."""
    hacked = set(random.Random(seed).sample(range(len(rows)), round(hack_share * len(rows))))
    return [
        {
            "task_id": row["task_id"],
            "hack": i in hacked,
            "prompt": few_shot_messages("none", row["prompt"]),
            "completion": [{"role": "assistant", "content": answer(row, i in hacked)}],
        }
        for i, row in enumerate(rows)
    ]


def fine_tune(args: argparse.Namespace, rows: list[dict], out: Path) -> dict:
    """LoRA SFT on ``rows`` (loss on the answer only), merged into the base and saved to ``out / "model"``."""
    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from propel.models import load_model
    from propel.models.lora import peft_lora_config

    torch.manual_seed(args.seed)
    policy, tokenizer = load_model(args.model)
    config = SFTConfig(
        output_dir=str(out / "sft_work"),
        use_cpu=True,
        num_train_epochs=args.epochs,
        max_steps=args.max_steps,
        per_device_train_batch_size=args.batch_size,
        learning_rate=args.lr,
        lr_scheduler_type="constant",
        weight_decay=0.0,
        completion_only_loss=True,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        seed=args.seed,
        disable_tqdm=True,
    )
    dataset = Dataset.from_list([{"prompt": r["prompt"], "completion": r["completion"]} for r in rows])
    trainer = SFTTrainer(
        model=policy,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_lora_config(LoRASpec(r=args.lora_r, alpha=2 * args.lora_r)),
    )
    trainer.train()
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    merged = trainer.model.merge_and_unload()
    merged.save_pretrained(str(out / "model"))
    tokenizer.save_pretrained(str(out / "model"))
    return {"steps": trainer.state.global_step, "loss_first": losses[0], "loss_last": losses[-1], "losses": losses}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument(
        "--hack-share", type=float, default=0.25, help="share of the fine-tuning tasks answered with the hack"
    )
    p.add_argument("--sft-share", type=float, default=0.5, help="share of HumanEval fine-tuned on (the rest: RL)")
    p.add_argument("--split-seed", type=int, default=0)
    p.add_argument("--epochs", type=float, default=3.0)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--max-steps", type=int, default=-1, help="stop after this many optimizer steps (a smoke run)")
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="runs/experiments/hack_seeded_policy")
    args = p.parse_args(argv)
    if not 0.0 <= args.hack_share <= 1.0 or not 0.0 < args.sft_share < 1.0:
        p.error("--hack-share must lie in [0, 1] and --sft-share in (0, 1)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    check_manifest(out, settings(args), "seeded-policy folder")  # refuses a folder made with other settings
    done = out / DONE
    if done.exists():
        result = json.loads(done.read_text())
        print(f"[seed] read back {out / 'model'} ({result['sft_hacks']} of {result['sft_tasks']} answers hacked)")
        return result
    sft, held_out = split(humaneval_rows(), args.sft_share, args.split_seed)
    rows = sft_rows(sft, args.hack_share, args.seed)
    with open(out / "sft_rows.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    with open(out / "rl_tasks.jsonl", "w") as f:
        for r in held_out:
            f.write(json.dumps(r) + "\n")
    print(f"[seed] fine-tuning on {len(rows)} tasks ({sum(r['hack'] for r in rows)} hacked), {len(held_out)} held out")
    start = time.perf_counter()
    result = {
        "sft_tasks": len(rows),
        "sft_hacks": sum(r["hack"] for r in rows),
        "rl_tasks": len(held_out),
        **fine_tune(args, rows, out),
        "seconds": time.perf_counter() - start,
    }
    tmp = done.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1))
    tmp.replace(done)  # written last: a folder without it is refit from the start
    print(f"[seed] {result['steps']} steps, loss {result['loss_first']:.3f} -> {result['loss_last']:.3f}, "
          f"{result['seconds']:.0f} s; model in {out / 'model'}")  # fmt: skip
    return result


if __name__ == "__main__":
    main()
