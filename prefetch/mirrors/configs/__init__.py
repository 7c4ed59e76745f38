"""One config writer per tool: pip, uv, conda, hf."""
