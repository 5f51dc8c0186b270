"""The `lstm_lm` workload: word-level LSTM language model on WikiText-2 (seed 000)."""
