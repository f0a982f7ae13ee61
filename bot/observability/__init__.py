"""What operators watch the bot by: its log (text or JSON, with the run's ids on every line)."""
