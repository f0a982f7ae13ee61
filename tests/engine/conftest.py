"""Engine test fixtures: the fake OpenAI server."""

from tests.fakes.fixtures import fake_openai  # noqa: F401
