"""The inbox: what was acknowledged and not yet handled (messages, decisions, ratings), stored
before the platform gets its 200 and handed to the workers from there."""
