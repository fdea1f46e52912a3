"""MkDocs hook (mkdocs.yml `hooks:`): heading anchors made the way GitHub makes them, so a link such as
`search.md#--dry-run` works both on the documentation site and when the Markdown is read on GitHub.
Python-Markdown's own slugify merges runs of hyphens (`-dry-run`); GitHub's keeps them."""

from __future__ import annotations

import re


def github_slug(value: str, separator: str = "-") -> str:
    """GitHub's heading anchor: lower case, punctuation other than `-` and `_` dropped, each space a `-`."""
    return re.sub(r"[^\w\- ]", "", value.strip().lower()).replace(" ", separator)


def on_config(config):
    config["mdx_configs"].setdefault("toc", {})["slugify"] = github_slug
    return config
