"""Rate limiting with the `limits` library: rules, storage, and RateLimit header fields."""
