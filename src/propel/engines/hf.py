"""The default rollout engine: batched HF ``generate`` on the live (possibly LoRA) policy, in-process.

Being the same model object the trainer updates, it needs no weight sync. Logprobs of the sampled tokens are
recorded during generation under the distribution actually sampled from (temperature, top-k, top-p applied), which is
the one the trainer scores: nothing the model's own ``generation_config`` sets is applied (``hf_config``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import torch

from propel.engines.engine import Completion, Engine, SamplingSpec, eos_token_ids
from propel.engines.hf_config import sampling_generation_config
from propel.models.lora import merged_lora_view
from propel.records import Prompt


class _SampledLogprobs:
    """A logits processor (last in the chain) recording log p(sampled token) one step late, in O(B * V) memory.

    At step t it sees the processed scores of step t; the token chosen from them is only visible at step t+1
    (as the last input id), so it keeps one step of log-softmaxed scores and gathers when the token arrives.
    """

    def __init__(self) -> None:
        self.prev: torch.Tensor | None = None
        self.steps: list[torch.Tensor] = []

    def _gather(self, tokens: torch.Tensor) -> None:
        if self.prev is not None:
            self.steps.append(self.prev.gather(-1, tokens[:, None]).squeeze(-1))

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.prev is not None:
            self._gather(input_ids[:, -1])
        self.prev = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def finish(self, sequences: torch.Tensor, num_new: int) -> torch.Tensor:
        """``(B, num_new)`` logprobs once generation is over."""
        if len(self.steps) < num_new:
            self._gather(sequences[:, -1])
        self.prev = None
        return torch.stack(self.steps[:num_new], dim=1) if num_new else sequences.new_zeros((sequences.shape[0], 0))


class HFEngine(Engine):
    """Rollouts with ``model.generate``.

    Args:
        model: a causal LM or peft model (used live: generations follow its current weights).
        tokenizer: its tokenizer (needs a pad token).
        max_batch_size: sequences per ``generate`` call (whole prompts are chunked: a prompt's ``n`` samples always
            share one call).
        merge_lora: generate from a merged view of a peft model's LoRA adapters (``merged_lora_view``: one matmul
            per adapted layer instead of the adapter path at every token; the base weights come back bit for bit).
            None: only for fp32 weights (in bf16 the merged weights round differently from the adapter path).
        share_prefill: run each prompt's prefill once and copy its KV cache to its ``n`` samples (instead of ``n``
            identical prefills): the same tokens and logprobs, and several times less prompt compute for long
            few-shot prompts; False prefills every sample row.
        cache_implementation: transformers' KV cache for decoding: None, the dynamic cache; ``"static"``, a
            preallocated one, around which ``generate`` compiles the decoding step on a GPU (on a CPU it decodes
            uncompiled). The same tokens and logprobs; whether it is faster on a card is what ``make gpu-check``'s
            ``generation`` part measures. A shared prefill is a dynamic cache, so it is off with this set.
    """

    def __init__(
        self,
        model,
        tokenizer,
        max_batch_size: int = 64,
        merge_lora: bool | None = None,
        share_prefill: bool = True,
        cache_implementation: str | None = None,
    ) -> None:
        if tokenizer.pad_token_id is None:
            raise ValueError("tokenizer has no pad token: set tokenizer.pad_token = tokenizer.eos_token")
        self.model, self.tokenizer, self.max_batch_size = model, tokenizer, max_batch_size
        self.cache_implementation = cache_implementation
        self.share_prefill = share_prefill and cache_implementation is None
        if merge_lora is None:
            merge_lora = next(model.parameters()).dtype == torch.float32
        self.merge_lora = bool(merge_lora) and hasattr(model, "disable_adapter") and hasattr(model, "peft_config")

    def context_length(self) -> int | None:
        return getattr(self.model.config, "max_position_embeddings", None)

    def eos_ids(self) -> frozenset[int]:
        """The tokenizer's EOS and the model's ``generation_config`` EOS list: what ``generate`` stops on."""
        return eos_token_ids(self.tokenizer, getattr(self.model, "generation_config", None))

    def generate(self, prompts: Sequence[Prompt], sampling: SamplingSpec) -> list[list[Completion]]:
        if sampling.n < 1 or sampling.max_new_tokens < 1:
            raise ValueError(
                f"sampling.n and sampling.max_new_tokens must be >= 1, got {sampling.n}, {sampling.max_new_tokens}"
            )
        encoded = [self.encode_prompt(p) for p in prompts]
        per_chunk = max(1, self.max_batch_size // sampling.n)  # whole prompts per generate call (n rows each)
        flat: list[Completion] = []
        was_training = self.model.training
        self.model.eval()
        try:
            with merged_lora_view(self.model) if self.merge_lora else contextlib.nullcontext():
                for start in range(0, len(encoded), per_chunk):
                    flat.extend(self._generate_batch(encoded[start : start + per_chunk], sampling))
        finally:
            self.model.train(was_training)
        return [flat[i * sampling.n : (i + 1) * sampling.n] for i in range(len(prompts))]

    @torch.no_grad()
    def _prefill(self, input_ids: torch.Tensor, attention: torch.Tensor, n: int):
        """KV cache of every prompt token but the last (which ``generate`` feeds itself), computed once per prompt
        and repeated for its ``n`` sample rows. Positions follow ``generate``'s own rule for left padding."""
        from transformers import DynamicCache

        cache = DynamicCache(config=self.model.config)
        positions = (attention.cumsum(-1) - 1).masked_fill(attention == 0, 0)
        self.model(
            input_ids=input_ids[:, :-1],
            attention_mask=attention[:, :-1],
            position_ids=positions[:, :-1],
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        cache.batch_repeat_interleave(n)
        return cache

    @torch.no_grad()
    def _generate_batch(self, prompts: list[list[int]], sampling: SamplingSpec) -> list[Completion]:
        """``sampling.n`` completions of each prompt (prompt-major order)."""
        from transformers import LogitsProcessorList
        from transformers.generation.logits_process import (
            TemperatureLogitsWarper,
            TopKLogitsWarper,
            TopPLogitsWarper,
        )

        pad, n = self.tokenizer.pad_token_id, sampling.n
        width = max(len(r) for r in prompts)
        device = next(self.model.parameters()).device
        input_ids = torch.tensor([[pad] * (width - len(r)) + r for r in prompts], device=device)
        attention = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in prompts], device=device)
        extra = {}
        if self.share_prefill and n > 1 and width > 1:
            extra["past_key_values"] = self._prefill(input_ids, attention, n)
        input_ids, attention = input_ids.repeat_interleave(n, 0), attention.repeat_interleave(n, 0)
        greedy = sampling.temperature == 0
        # Warpers go in our own list so the recorder, appended last, sees the final sampling distribution.
        processors = LogitsProcessorList()
        if not greedy:
            if sampling.temperature != 1.0:
                processors.append(TemperatureLogitsWarper(sampling.temperature))
            if sampling.top_k:
                processors.append(TopKLogitsWarper(top_k=sampling.top_k))
            if sampling.top_p < 1.0:
                processors.append(TopPLogitsWarper(top_p=sampling.top_p))
        recorder = _SampledLogprobs() if sampling.logprobs else None
        if recorder is not None:
            processors.append(recorder)
        eos = sorted(self.eos_ids())
        config = sampling_generation_config(
            self.model,
            greedy=greedy,
            max_new_tokens=sampling.max_new_tokens,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            pad_token_id=pad,
            eos_token_id=eos or None,
            bos_token_id=self.tokenizer.bos_token_id,
            stop_strings=list(sampling.stop) or None,
            cache_implementation=self.cache_implementation,
        )
        if sampling.stop:
            extra["tokenizer"] = self.tokenizer
        sequences = self.model.generate(
            input_ids=input_ids,
            attention_mask=attention,
            generation_config=config,
            logits_processor=processors,
            **extra,
        )
        new = sequences[:, width:]
        logprobs = recorder.finish(sequences, new.shape[1]).cpu() if recorder is not None else None
        return [
            self._completion(new[i].tolist(), None if logprobs is None else logprobs[i].tolist(), sampling, set(eos))
            for i in range(input_ids.shape[0])
        ]

    def _completion(self, ids: list[int], logprobs: list[float] | None, sampling: SamplingSpec, eos: set[int]):
        """Cut at EOS or the first stop string: kept in ``token_ids`` (the policy chose to stop), not in ``text``."""
        finish = "length"
        end = next((j + 1 for j, t in enumerate(ids) if t in eos), None)
        if end is not None:
            ids, finish = ids[:end], "stop"
        body = ids[:-1] if finish == "stop" else ids
        text = self.tokenizer.decode(body, skip_special_tokens=True)
        hits = [(text.find(s), -len(s), s) for s in sampling.stop if s and s in text]
        if hits:
            cut, _, stop = min(hits)
            text, finish = text[:cut], "stop"
            ids = ids[: self._tokens_to_reach(body, cut + len(stop))]
        if logprobs is not None:
            logprobs = logprobs[: len(ids)]
        return Completion(text=text, token_ids=ids, logprobs=logprobs, finish_reason=finish)

    def _tokens_to_reach(self, ids: list[int], chars: int) -> int:
        """Fewest leading tokens whose decoded text is at least ``chars`` long (binary search; decode is monotone)."""
        lo, hi = 1, len(ids)
        while lo < hi:
            mid = (lo + hi) // 2
            if len(self.tokenizer.decode(ids[:mid], skip_special_tokens=True)) >= chars:
                hi = mid
            else:
                lo = mid + 1
        return lo
