"""Tests of scorers/live/."""
