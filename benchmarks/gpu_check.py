"""Every CUDA path propel has, run and timed on one GPU in minutes (``make gpu-check``, ``bash scripts/gpu_check.sh``).

On the bundled model (bf16 weights, bf16 autocast; on a device without its weights, its architecture and tokenizer
with random weights: ``scripts/gpu_check.sh``), one part after another, each with its own time limit (120 s; parts
not started by 330 s are skipped), the results written after every part (a run cut short keeps what finished):

- ``grpo_hf_bf16``: GRPO steps with the HF engine (``benchmarks/grpo_step.py``'s ``run_propel``);
- ``trl_grpo``: TRL's ``GRPOTrainer`` on the same settings, same card, same run (``run_trl``): propel / TRL s/step;
- ``turn_kl``: one turn-targeted KL step (``benchmarks/distill_step.py``'s episodes; teacher under no grad, student
  forward + backward);
- ``probe_extraction``: early-stop activation extraction (``ActivationExtractor``) of a batch of texts;
- ``fsdp``: the GRPO step under ``propel.models.fsdp.LoRAFSDPStrategy`` (Lightning's ``FSDPStrategy`` with units of
  one dtype each) on the one GPU, and the sampling view's max logit difference from the adapter path inside FSDP
  units (skipped on CPU, with the reason);
- ``memory``: ``grpo_hf_bf16``'s peak GPU memory against ``benchmarks/gpu_memory.py``'s estimate for the same
  settings (prompt length measured with the tokenizer);
- ``generation``: one step's sampling in six variants (propel's engine as the trainer runs it, with merged LoRA,
  without autocast, with a static KV cache; plain ``generate`` as TRL samples, and with a static cache): where
  propel's generation time goes, and whether a static cache (compiled decoding on a GPU) is faster, in tokens/s.

Writes ``gpu_check.json`` and ``gpu_check.md`` into ``--out`` (default ``$OUT`` when set, else ``runs/gpu_check``).
Without a CUDA GPU it stops with one line (exit 2); ``--device cpu`` runs the parts on CPU (fp32; FSDP skipped), which
is what the smoke test does on a tiny model.

    bash scripts/gpu_check.sh                                    # on the GPU machine (installs .gpu_wheels if needed)
    python benchmarks/gpu_check.py --device cpu --model DIR --steps 1 --group 2 --new-tokens 8   # the parts on CPU
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("grpo_hf_bf16", "trl_grpo", "turn_kl", "probe_extraction", "fsdp", "memory", "generation")
NO_GPU = (
    "gpu-check: no CUDA GPU is visible to torch {torch} (CUDA build: {cuda}); run it on a GPU machine (docs/gpu.md)"
)


def benchmark(name: str):
    """``benchmarks/<name>.py`` as a module (the folder is not a package)."""
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class PartTimeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: int):
    """Raise ``PartTimeout`` in the main thread after ``seconds`` (SIGALRM; no limit where it is unavailable)."""
    if seconds <= 0 or not hasattr(signal, "SIGALRM"):
        yield
        return

    def expire(signum, frame):
        raise PartTimeout(f"over its {seconds} s limit")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# ------------------------------------------------------------------------------------------------------------ parts
def _step_row(r: dict) -> dict:
    """A GRPO run's row: seconds per step, peak memory, and the run's own numbers."""
    return {"s_per_step": r["s_per_step"], "peak_gpu_mib": r["peak_gpu_mib"], "peak_rss_mib": r["peak_rss_mib"],
            "detail": r}  # fmt: skip


def part_grpo(args, results: dict) -> dict:
    r = benchmark("grpo_step").run_propel(args.model, args.steps, "hf", args.device, **shape(args))
    return _step_row(r)


def part_trl(args, results: dict) -> dict:
    import trl

    r = benchmark("grpo_step").run_trl(args.model, args.steps, False, args.device, **shape(args))
    out = {"s_per_step": r["s_per_step"], "peak_gpu_mib": r["peak_gpu_mib"], "peak_rss_mib": r["peak_rss_mib"]}
    propel = results.get("grpo_hf_bf16", {})
    if propel.get("status") == "ran" and r["s_per_step"]:
        out["propel_over_trl"] = propel["s_per_step"] / r["s_per_step"]
    return {**out, "trl_version": trl.__version__, "detail": r}


def part_turn_kl(args, results: dict) -> dict:
    import torch

    from propel.lit_modules.distill import TurnKLDistillModule
    from propel.losses.distillation import DivergenceSpec, masked_mean, token_divergence
    from propel.rollouts.hints import FunctionHints, Hint

    turns = 4
    module = TurnKLDistillModule(
        hints=FunctionHints(lambda s: [Hint(turns // 2, "Answer with exactly one tool call.")]),
        model=args.model,
        dtype=dtype(args),
    )
    module.configure_model()
    module.to(device(args))
    samples = benchmark("distill_step").episodes(module.tokenizer, 2, turns, 32, 64)
    targets = module.turn_term.targets(samples)
    lengths = [t.length for t in targets]
    mask, spec = module.turn_term.mask(lengths), DivergenceSpec("forward_kl")

    def step() -> float:
        sync(args)
        start = time.perf_counter()
        with module.eval_mode(), autocast(args):
            with torch.no_grad():
                teacher = module.turn_term.turn_logits([t.teacher_ids for t in targets], lengths, "teacher")
            student = module.turn_term.turn_logits([t.student_ids for t in targets], lengths, "student")
            loss = masked_mean(token_divergence(student.float(), teacher.float(), spec), mask)
        loss.backward()
        module.policy.zero_grad(set_to_none=True)
        sync(args)
        return time.perf_counter() - start

    with peak_memory() as memory:
        step()  # warm-up
        times = [step() for _ in range(max(args.steps, 1))]
    return {
        "s_per_step": sum(times) / len(times),
        "targets": len(targets),
        "loss_tokens": int(sum(lengths)),
        **memory.stats(),
    }


def part_extraction(args, results: dict) -> dict:
    import torch

    from propel.models import load_model
    from propel.probes.extraction import ActivationExtractor, num_layers

    model, tok = load_model(args.model, dtype=dtype(args), device=device(args))
    texts = benchmark("extraction").texts(32)
    layer = max(1, num_layers(model) - 3)
    extractor = ActivationExtractor(model, tok, [layer], ["mean_last_half"], batch_size=16)
    with peak_memory() as memory, torch.no_grad():
        extractor.encode(texts)  # warm-up
        sync(args)
        start = time.perf_counter()
        features = extractor.encode(texts)[extractor.keys[0]]
        sync(args)
        seconds = time.perf_counter() - start
    if not torch.isfinite(features.float()).all():
        raise FloatingPointError("non-finite probe features")
    return {
        "s_per_step": seconds,
        "texts": len(texts),
        "layer": layer,
        "features": list(features.shape),
        **memory.stats(),
    }


def part_fsdp(args, results: dict) -> dict:
    """The GRPO step under ``LoRAFSDPStrategy`` (a plain ``FSDPStrategy`` fails on the bf16 base + fp32 adapters),
    then the sampling view's check inside FSDP units: merged-weight logits against the adapter path's."""
    if args.device != "gpu":
        return {"status": "skipped", "reason": "Lightning's FSDPStrategy requires a GPU accelerator (this run is CPU)"}
    from propel.models.fsdp import LoRAFSDPStrategy

    r = benchmark("grpo_step").run_propel(args.model, 1, "hf", args.device, strategy=LoRAFSDPStrategy(), **shape(args))
    return {**_step_row(r), "merged_view": _fsdp_merged_view(args)}


def _fsdp_merged_view(args) -> dict:
    """Max |logit difference| of the merged-weights view (``HFEngine(merge_lora=True)``) against the adapter path,
    inside FSDP units, beside the adapter's own effect (adapter path against adapters off); fails if the view drops
    it."""
    import tempfile

    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import FullyShardedDataParallel, MixedPrecision

    from propel.models import LoRASpec, apply_lora, load_model
    from propel.models.fsdp import lora_wrap_policy
    from propel.models.lora import merged_lora_view

    if not dist.is_initialized():
        store = Path(tempfile.mkdtemp()) / "store"
        dist.init_process_group("nccl", init_method=f"file://{store}", rank=0, world_size=1)
    model, _ = load_model(args.model, dtype="bfloat16", device="cuda")
    policy = apply_lora(model, LoRASpec())
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)  # B starts at zero: make the adapter change the output
    ids = torch.arange(5, 69, device="cuda")[None]
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        with policy.disable_adapter():
            base = policy(input_ids=ids).logits.float()
        bf16 = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16, buffer_dtype=torch.bfloat16)
        wrapped = FullyShardedDataParallel(
            policy, device_id=torch.cuda.current_device(), use_orig_params=True, mixed_precision=bf16,
            auto_wrap_policy=lora_wrap_policy(),
        )  # fmt: skip
        adapted = wrapped(input_ids=ids).logits.float()
        with merged_lora_view(wrapped.module) as merged_policy:
            merged = merged_policy(input_ids=ids).logits.float()
    out = {
        "adapter_effect": float((adapted - base).abs().max()),
        "merged_vs_adapter": float((merged - adapted).abs().max()),
    }
    if not out["merged_vs_adapter"] < 0.1 * out["adapter_effect"]:
        raise AssertionError(f"the merged view inside FSDP units lost the adapter: {out}")
    return out


def part_generation(args, results: dict) -> dict:
    """One GRPO step's sampling (``--prompts`` x ``--group``, ``--new-tokens``), timed in variants that split
    propel's engine from plain ``generate``: on the H200 propel's step was slower than TRL's in generation alone.

    ``engine``: ``HFEngine`` as the trainer runs it (bf16 autocast around it, as Lightning's precision puts it, and
    the adapter path, since ``merge_lora`` is off for bf16 weights); ``engine_merged``: the same with merged LoRA;
    ``engine_no_autocast``: without autocast; ``engine_static``: with ``cache_implementation="static"`` (a
    preallocated KV cache that ``generate`` compiles its decoding step around on a GPU); ``plain_generate``: peft's
    ``generate`` with the same sampling and no logprob recording, the way TRL samples; ``plain_static``: the same
    with a static cache (TRL's ``cache_implementation``). Per variant: seconds per call (mean of ``--steps`` after a
    warm-up), the warm-up call's seconds (compilation included), new tokens per second, or the error it raised.
    """
    import torch

    from propel.domains import MathExpressionDomain
    from propel.engines.engine import SamplingSpec
    from propel.engines.hf import HFEngine
    from propel.models import LoRASpec, apply_lora, load_model

    model, tok = load_model(args.model, dtype=dtype(args), device=device(args))
    policy = apply_lora(model, LoRASpec())
    prompts = [c.prompt for c in MathExpressionDomain().contexts(args.prompts, seed=7)]
    spec = SamplingSpec(n=args.group, max_new_tokens=args.new_tokens, logprobs=True)

    def engine(cast: bool, **kwargs):
        eng = HFEngine(policy, tok, **kwargs)

        def run() -> int:
            groups = _under(autocast(args) if cast else contextlib.nullcontext(), eng.generate, prompts, spec)
            return sum(len(c.token_ids) for g in groups for c in g)

        return run

    encoder = HFEngine(policy, tok)  # prompts as the engine encodes them
    rows = [encoder.encode_prompt(p) for p in prompts]
    width, pad = max(len(r) for r in rows), tok.pad_token_id
    input_ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows], device=device(args))
    attention = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], device=device(args))

    def plain(**kwargs):
        def run() -> int:
            with autocast(args), torch.no_grad():
                out = policy.generate(
                    input_ids=input_ids, attention_mask=attention, do_sample=True, max_new_tokens=args.new_tokens,
                    num_return_sequences=args.group, pad_token_id=pad, **kwargs,
                )  # fmt: skip
            return int((out[:, width:] != pad).sum())

        return run

    variants = {  # the comparison the H200 asked for first, then what might explain or close the gap
        "engine": engine(True, merge_lora=False),
        "plain_generate": plain(),
        "engine_merged": engine(True, merge_lora=True),
        "engine_static": engine(True, merge_lora=False, cache_implementation="static"),
        "plain_static": plain(cache_implementation="static"),
        "engine_no_autocast": engine(False, merge_lora=False),
    }
    report: dict[str, dict] = {}
    with peak_memory() as memory:
        for name, run in variants.items():
            try:
                sync(args)
                start = time.perf_counter()
                run()  # warm-up (and compilation, where generate compiles)
                sync(args)
                first = time.perf_counter() - start
                times, tokens = [], 0
                for _ in range(max(args.steps, 1)):
                    sync(args)
                    start = time.perf_counter()
                    tokens += run()
                    sync(args)
                    times.append(time.perf_counter() - start)
                report[name] = {
                    "s_per_call": sum(times) / len(times),
                    "first_call_s": first,
                    "tokens_per_s": tokens / sum(times),
                }
            except PartTimeout as e:  # the part's limit: keep what ran, say what did not
                report[name] = {"error": f"PartTimeout: {e}"}
                for later in list(variants)[len(report) :]:
                    report[later] = {"error": "not started: the part's time limit was reached"}
                break
            except Exception as e:  # noqa: BLE001 - one variant's failure is its result; the others still run
                report[name] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    seconds = {k: v["s_per_call"] for k, v in report.items() if "s_per_call" in v}
    return {"s_per_step": seconds.get("engine"), "variants": seconds, "variant_details": report, **memory.stats()}


def _under(context, fn, *a):
    """``fn(*a)`` under ``context`` and no grad (as the trainers sample)."""
    import torch

    with context, torch.no_grad():
        return fn(*a)


def part_memory(args, results: dict) -> dict:
    from propel.domains import MathExpressionDomain
    from propel.models.loading import load_tokenizer, resolve_model_dir
    from propel.models.memory import GIB, KNOWN, ArchSpec

    grpo = results.get("grpo_hf_bf16", {})
    if grpo.get("status") != "ran":
        return {"status": "skipped", "reason": "grpo_hf_bf16 did not run: nothing measured to compare"}
    tok = load_tokenizer(args.model)
    contexts = MathExpressionDomain().contexts(args.prompts, seed=7)
    prompt_tokens = max(len(tok(c.prompt.text)["input_ids"]) for c in contexts)
    if args.model in KNOWN:
        arch = KNOWN[args.model]
    else:
        arch = ArchSpec.from_config(json.loads((Path(resolve_model_dir(args.model)) / "config.json").read_text()))
    model = {
        "max_new_tokens": args.new_tokens,
        "group_size": args.group,
        "micro_batch_size": args.prompts * args.group,
        "engine": "hf",
        "lora": {"r": 16},
    }
    est = benchmark("gpu_memory").grpo_estimate(arch, model, {"contexts_per_step": args.prompts}, prompt_tokens, False)
    estimate_mib = (est.total - est.overhead) / 2**20  # torch's allocator counts no CUDA context
    out = {
        "prompt_tokens": prompt_tokens,
        "estimate_mib": round(estimate_mib, 1),
        "estimate_parts_gib": {k: round(v, 4) for k, v in est.rows()},
        "overhead_gib": est.overhead / GIB,
    }
    measured = grpo.get("peak_gpu_mib")
    if measured is None:
        return {**out, "status": "skipped", "reason": "no GPU memory to compare on CPU (the estimate is written)"}
    return {**out, "peak_gpu_mib": measured, "measured_over_estimate": measured / estimate_mib}


RUNNERS = {
    "grpo_hf_bf16": part_grpo,
    "trl_grpo": part_trl,
    "turn_kl": part_turn_kl,
    "probe_extraction": part_extraction,
    "fsdp": part_fsdp,
    "memory": part_memory,
    "generation": part_generation,
}


# ---------------------------------------------------------------------------------------------------------- helpers
def shape(args) -> dict:
    return {"prompts_per_step": args.prompts, "group": args.group, "new_tokens": args.new_tokens}


def dtype(args) -> str:
    return "bfloat16" if args.device == "gpu" else "float32"


def device(args) -> str:
    return "cuda" if args.device == "gpu" else "cpu"


def autocast(args):
    import torch

    return torch.autocast("cuda", dtype=torch.bfloat16) if args.device == "gpu" else contextlib.nullcontext()


def sync(args) -> None:
    import torch

    if args.device == "gpu":
        torch.cuda.synchronize()


def peak_memory():
    return benchmark("grpo_step").PeakMemory()


def commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        return (out.stdout.strip() or "unknown") + ("+dirty" if dirty else "")
    except OSError:
        return "unknown"


def card() -> str:
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    props = torch.cuda.get_device_properties(0)
    return f"{props.name} ({props.total_memory / 2**30:.0f} GiB)"


def markdown(report: dict) -> str:
    """The measured table ``docs/gpu.md`` takes: one row per part."""
    st = report["settings"]
    model = st["model"] + (f" ({st['model_note']})" if st.get("model_note") else "")
    head = (
        f"{report['card']}, {report['date']}, commit {report['commit']}, torch {report['torch']}, {model}, "
        f"{st['prompts']} prompts x G={st['group']}, <= {st['new_tokens']} new tokens, {st['steps']} timed steps"
    )
    lines = [
        head,
        "",
        "| part | status | s/step | peak GPU MiB | peak RSS MiB | vs TRL / estimate | why / note |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in report["parts"]:
        r = report["results"].get(name, {"status": "not run"})

        def num(key, fmt, r=r):
            return format(r[key], fmt) if isinstance(r.get(key), int | float) else "-"

        ratio = "-"
        if "propel_over_trl" in r:
            ratio = f"propel / TRL = {r['propel_over_trl']:.2f}x"
        elif "measured_over_estimate" in r:
            ratio = f"measured / estimate = {r['measured_over_estimate']:.2f} (estimate {r['estimate_mib']:.0f} MiB)"
        elif "estimate_mib" in r:
            ratio = f"estimate {r['estimate_mib']:.0f} MiB"
        note = r.get("reason", "")
        if "variant_details" in r:
            note = "per call: " + ", ".join(
                f"{k} {v['s_per_call']:.2f} s ({v['tokens_per_s']:.0f} tok/s, first {v['first_call_s']:.1f} s)"
                if "s_per_call" in v
                else f"{k} failed ({v['error'][:80]})"
                for k, v in r["variant_details"].items()
            )
        if "merged_view" in r:
            view = r["merged_view"]
            note = (
                f"merged view vs adapter path {view['merged_vs_adapter']:.3g} "
                f"(adapter effect {view['adapter_effect']:.3g})"
            )
        lines.append(
            f"| {name} | {r['status']} | {num('s_per_step', '.2f')} | {num('peak_gpu_mib', '.0f')} | "
            f"{num('peak_rss_mib', '.0f')} | {ratio} | {note} |"
        )
    return "\n".join(lines) + "\n"


def write(out: Path, report: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.json").write_text(json.dumps(report, indent=2, default=str))
    (out / "gpu_check.md").write_text(markdown(report))


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("gpu", "cpu"), default="gpu", help="cpu: the parts in fp32 (a smoke run)")
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--model-note", default="", help="said beside the model in the table (e.g. random weights)")
    p.add_argument("--steps", type=int, default=3, help="timed steps per trainer (after one warm-up step)")
    p.add_argument("--prompts", type=int, default=2, help="prompts per GRPO step")
    p.add_argument("--group", type=int, default=4, help="completions per prompt (G)")
    p.add_argument("--new-tokens", type=int, default=64, help="max new tokens per completion")
    p.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    p.add_argument("--part-limit-s", type=int, default=120, help="each part's time limit")
    p.add_argument("--budget-s", type=int, default=330, help="parts not started by then are skipped (8 min in all)")
    default_out = Path(os.environ["OUT"]) if os.environ.get("OUT") else ROOT / "runs" / "gpu_check"
    p.add_argument("--out", type=Path, default=default_out)
    args = p.parse_args(argv)

    import torch

    if args.device == "gpu" and not torch.cuda.is_available():
        print(NO_GPU.format(torch=torch.__version__, cuda=torch.version.cuda), file=sys.stderr)
        raise SystemExit(2)
    os.environ.setdefault("WANDB_MODE", "offline")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    start = time.perf_counter()
    report = {
        "card": card(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit(),
        "torch": torch.__version__,
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "parts": list(args.parts),
        "results": {},
    }
    for name in args.parts:
        left = args.budget_s - (time.perf_counter() - start)
        if left < 10:
            report["results"][name] = {"status": "skipped", "reason": f"the {args.budget_s} s budget was spent"}
            write(args.out, report)
            continue
        t0 = time.perf_counter()
        try:
            with time_limit(int(min(args.part_limit_s, left))):
                got = RUNNERS[name](args, report["results"])
            got = {"status": "ran", **got}
        except Exception as err:  # a failed part is a result: say why and go on
            first = (str(err).strip().splitlines() or [""])[0][:300]
            got = {"status": "failed", "reason": f"{type(err).__name__}: {first}", "traceback": traceback.format_exc()}
        got["wall_s"] = round(time.perf_counter() - t0, 2)
        report["results"][name] = got
        print(f"gpu-check: {name}: {got['status']} in {got['wall_s']:.1f} s {got.get('reason', '')}", flush=True)
        write(args.out, report)
        if args.device == "gpu":
            torch.cuda.empty_cache()
    report["wall_s"] = round(time.perf_counter() - start, 1)
    write(args.out, report)
    print(markdown(report))
    print(f"gpu-check: wrote {args.out / 'gpu_check.json'} and gpu_check.md in {report['wall_s']:.0f} s")
    return report


if __name__ == "__main__":
    main()
