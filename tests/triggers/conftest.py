"""Fixtures for the trigger tests: the fake model server (FakeSlack and the ops API come from
tests/conftest.py)."""

from tests.fakes.fixtures import fake_openai  # noqa: F401
