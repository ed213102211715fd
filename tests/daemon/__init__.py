"""Tests of daemon/."""
