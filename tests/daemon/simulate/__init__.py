"""Tests of daemon/simulate/."""
