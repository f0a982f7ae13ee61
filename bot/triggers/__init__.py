"""Triggers: inbound webhooks (Alertmanager, PagerDuty, any HMAC-signing sender) that open a
conversation in a chat channel, as if someone had mentioned the bot there (docs/triggers.md)."""
