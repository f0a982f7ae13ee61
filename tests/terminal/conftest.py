"""`chatops chat` tests drive the same fakes as the connector tests: the fake HTTP API and model."""

from tests.connectors.conftest import fake_api, http  # noqa: F401
from tests.fakes.fixtures import fake_openai  # noqa: F401
