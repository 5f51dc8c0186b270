"""The `rnn_micro` workload: fused vs unfused vs compiled LSTM, µs per example (seed 001)."""
