"""Tests of daemon/reviews/."""
