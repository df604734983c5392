"""The reference pages generated from the code when the site is built (docs/gen_reference.py,
run by mkdocs-gen-files): the config and policy file properties, error codes, metrics, the
command line and operation placeholders. Each module makes one page."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENERATED_PAGES = ("reference/config.md", "reference/policy-files.md", "reference/errors.md",
                   "reference/metrics.md", "reference/cli.md", "reference/placeholders.md")


def pages() -> dict[str, str]:
    """Page path under docs/ -> its Markdown."""
    from refgen import cli_ref, config_ref, errors_ref, metrics_ref, placeholders_ref

    found = {
        "reference/config.md": config_ref.config_page(),
        "reference/policy-files.md": config_ref.policy_page(),
        "reference/errors.md": errors_ref.page(ROOT / "gateway", ROOT / "config" / "demo.yaml"),
        "reference/metrics.md": metrics_ref.page(),
        "reference/cli.md": cli_ref.page(),
        "reference/placeholders.md": placeholders_ref.page(),
    }
    assert tuple(found) == GENERATED_PAGES
    return found
