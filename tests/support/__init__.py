"""Helpers shared by the test suites (real servers, never mocks)."""
