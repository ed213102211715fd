"""Tests of daemon/http/."""
