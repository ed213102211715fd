"""Tests of daemon/store/."""
