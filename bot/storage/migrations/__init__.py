"""Alembic migrations for the bot's database (run by `bot.storage.migrate.upgrade` at start-up)."""
