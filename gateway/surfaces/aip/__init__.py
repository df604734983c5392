"""The Agentic Intent Protocol 0.1 surface: publisher policy, retrieve, signing and events."""
