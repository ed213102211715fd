"""Tests of scorers/."""
