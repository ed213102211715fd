"""Tests of collectors/."""
