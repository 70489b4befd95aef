"""Counted nouns in messages: "1 item", "2 items", "1,234 users" (never "1 items")."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`count` with thousands separators and `noun` in the singular for one, else `plural` (default: noun + "s")."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"
