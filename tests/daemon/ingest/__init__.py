"""Tests of daemon/ingest/."""
