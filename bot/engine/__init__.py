"""The ReAct engine: pure asyncio; knows no chat platform, no database, no platform SDK."""
