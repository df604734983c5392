"""Calls to URLs a client registered (SSRF defence): the locked-down client (`client`), the
addresses it may reach (`addresses`), the strict URL rule (`urls`) and its config (`config`).

Such a URL is one a stranger chose. The runtime builds one client for each surface that
declares egress rules (`surface.Mount.egress`), shared across reloads with the same rules, and
the pipeline hands it to that surface's requests (`Pipeline.calls`): a surface never builds or
holds one. This package imports no HTTP client until `client` is imported, so a config that
names egress rules loads without one.
"""
