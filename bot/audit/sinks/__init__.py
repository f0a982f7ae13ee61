"""Audit sinks: every call-log and approval event, as it happens, to an HTTP endpoint or a file.

`ocsf` shapes an event (OCSF API Activity), `targets` are the sinks, `sender` ships the outbox
(`bot.storage.outbox`), `wiring` builds them from the settings. docs/audit.md describes it all.
"""
