"""Policy: what each principal may see, decided in one place for every surface."""
