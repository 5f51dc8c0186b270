"""The journal of records, the result store that reads and writes it, and finding runs."""
