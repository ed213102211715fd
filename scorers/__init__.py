"""Scorers: pure functions of (records, evaluation time, window, config). No I/O, no clock."""
