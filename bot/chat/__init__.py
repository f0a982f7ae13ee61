"""The chat vocabulary: what surfaces and the services below them say to each other."""
