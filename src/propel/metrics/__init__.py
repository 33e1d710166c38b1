"""Metrics: utility band, calibration, diversity (Self-BLEU, Distinct-n, top-topic)."""
