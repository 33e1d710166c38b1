"""A scripted policy: an engine whose "generation" is a function of the prompt text, tokenized like real output.

It drives real environments end to end with chosen actions (tests, the episode benchmark's tool workload, demos of
an environment) and exercises the exact code paths a sampling engine does: token-id prompts in, token ids and
logprobs out, stop strings, the end-of-turn token, per-call token budgets.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from propel.engines.engine import Completion, Engine, SamplingSpec
from propel.records import Prompt


class ScriptedEngine(Engine):
    """Answers each prompt with ``script(prompt_text)``, ended by the tokenizer's end-of-turn token.

    Args:
        tokenizer: an HF tokenizer (its chat template renders chat prompts).
        script: maps the exact prompt text (chat template applied, all earlier turns included) to the reply.
        context_length: the limit ``context_length()`` reports (None: unlimited).
        delay_s: seconds each ``generate`` call sleeps (stands in for generation time in benchmarks).
        split_tokens: emit every token that is two vocabulary tokens glued together as those two. A sampler may
            produce any split of a text, not only the tokenizer's own; a trajectory must keep the split it got, so
            code that re-tokenizes generated text fails with this engine where it passes with canonical ids.
    """

    def __init__(
        self,
        tokenizer,
        script: Callable[[str], str],
        context_length: int | None = None,
        delay_s: float = 0.0,
        split_tokens: bool = False,
    ) -> None:
        self.tokenizer, self.script, self._context_length, self.delay_s = tokenizer, script, context_length, delay_s
        self.split_tokens = split_tokens
        self.calls: list[int] = []
        """Batch sizes of the ``generate`` calls so far."""
        self._splits: dict[int, tuple[int, int] | None] = {}

    def context_length(self) -> int | None:
        return self._context_length

    def generate(self, prompts: Sequence[Prompt], sampling: SamplingSpec) -> list[list[Completion]]:
        self.calls.append(len(prompts))
        if self.delay_s:
            time.sleep(self.delay_s)
        out = []
        for prompt in prompts:
            text = self.script(self.render(prompt))
            out.append([self._completion(text, sampling) for _ in range(sampling.n)])
        return out

    def _completion(self, text: str, sampling: SamplingSpec) -> Completion:
        hits = [(text.find(s), s) for s in sampling.stop if s and s in text]
        at = None
        if hits:  # the first stop string is kept in the tokens (the policy wrote it), not in the text, as in HFEngine
            at, stop = min(hits)
            text = text[: at + len(stop)]
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if self.split_tokens:
            ids = [part for i in ids for part in (self._split(i) or (i,))]
        if at is None and self.tokenizer.eos_token_id is not None:
            ids = ids + [self.tokenizer.eos_token_id]
        finish = "stop"
        if len(ids) > sampling.max_new_tokens:
            ids, finish = ids[: sampling.max_new_tokens], "length"
        shown = self.tokenizer.decode(ids, skip_special_tokens=True)
        if at is not None and finish == "stop":
            shown = shown[:at]
        return Completion(text=shown, token_ids=ids, logprobs=[0.0] * len(ids), finish_reason=finish)

    def _split(self, token_id: int) -> tuple[int, int] | None:
        """Two vocabulary tokens whose concatenation is ``token_id``'s piece (same bytes, so the same text), or None
        (special tokens and single characters are kept whole)."""
        if token_id not in self._splits:
            self._splits[token_id] = None
            piece = self.tokenizer.convert_ids_to_tokens(token_id)
            if token_id not in self.tokenizer.all_special_ids and len(piece) > 1:
                vocab = self.tokenizer.get_vocab()
                cuts = [k for k in range(1, len(piece)) if piece[:k] in vocab and piece[k:] in vocab]
                if cuts:
                    self._splits[token_id] = (vocab[piece[: cuts[0]]], vocab[piece[cuts[0] :]])
        return self._splits[token_id]
