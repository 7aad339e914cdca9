"""Tile-IR passes. Each pass is a function ``Function -> Function`` (it may mutate and return it)."""
