"""Collectors: pure parsers that turn cos-state files into typed records, plus the tailer that feeds them."""
