"""Smoke check: load the bundled model offline and answer a question greedily (``python -m propel.models.smoke``)."""

from __future__ import annotations

import sys
import time


def main(question: str = "What is the capital of France?", model: str = "smollm2-135m-instruct") -> str:
    from propel.models import load_model

    start = time.monotonic()
    lm, tok = load_model(model)
    inputs = tok.apply_chat_template(
        [{"role": "user", "content": question}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    out = lm.generate(**inputs, max_new_tokens=32, do_sample=False)
    answer = tok.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True).strip()
    print(f"Q: {question}\nA: {answer}\n({model}, {time.monotonic() - start:.1f}s)")
    return answer


if __name__ == "__main__":
    main(*sys.argv[1:2])
