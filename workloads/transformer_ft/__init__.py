"""The `transformer_ft` workload: DistilBERT sequence-classification fine-tuning (seed 004)."""
