"""A tool's questions to the people of a run (MCP elicitation): forms in the thread, answers back
to the tool. Never an approval: this feature imports nothing that decides one."""
