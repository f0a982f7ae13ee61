"""Alembic migrations for the bot's database (run by `bot.migrate.upgrade` at start-up)."""
