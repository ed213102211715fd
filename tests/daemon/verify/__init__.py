"""Tests of daemon/verify/."""
