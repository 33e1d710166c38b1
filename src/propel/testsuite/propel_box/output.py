"""What a runner reports of a graded process's own output (stdout and stderr, in one capped file): its tail."""

MAX_TAIL = 2_000
"""Characters of a graded process's output a runner reports."""


def output_tail(path):
    """The last ``MAX_TAIL`` characters of the first MiB written to ``path`` ("" if there is none)."""
    try:
        with open(path, "rb") as f:
            return f.read(1 << 20).decode("utf-8", "replace")[-MAX_TAIL:]
    except OSError:
        return ""
