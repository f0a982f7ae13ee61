"""PreToolUse / PostToolUse hooks: deterministic policy outside the LLM loop."""
