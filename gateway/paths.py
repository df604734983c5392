"""Path-prefix matching shared by route rules and rate-limit rules."""


def matches_prefix(prefix: str, path: str) -> bool:
    """"/api" covers "/api" and "/api/x" but not "/apix"; "/" and "/api/" cover what they begin."""
    if not path.startswith(prefix):
        return False
    return prefix.endswith("/") or len(path) == len(prefix) or path[len(prefix)] == "/"
