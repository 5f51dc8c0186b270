"""The fault-injection suite (issue 8): every guarantee in docs/RELIABILITY.md has its test here."""
