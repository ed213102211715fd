"""System tests: the real daemon, CLI, Prometheus, Chromium and the shipped files."""
