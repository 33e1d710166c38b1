"""Task pools: the Parquet folders that labeling, evaluation and adversarial mining write and probes read.

One home for the schema (``schema.py``), the row built from a scored sample (``rows.py``), reading and atomic
writing (``io.py``), the settings manifest that keeps a resume from mixing settings (``manifest.py``) and the
summaries printed and logged at the end of a run (``summary.py``).
"""

from propel.pools.io import pool_parts, read_labels, read_pool, write_part
from propel.pools.manifest import check_manifest, run_settings
from propel.pools.rows import from_record, pool_row
from propel.pools.schema import COLUMNS, MINED_SCHEMA, SCHEMA
from propel.pools.summary import diversity_scores, evaluation_summary, pool_summary, print_summary_table

__all__ = [
    "COLUMNS",
    "MINED_SCHEMA",
    "SCHEMA",
    "check_manifest",
    "diversity_scores",
    "evaluation_summary",
    "from_record",
    "pool_parts",
    "pool_row",
    "pool_summary",
    "print_summary_table",
    "read_labels",
    "read_pool",
    "run_settings",
    "write_part",
]
