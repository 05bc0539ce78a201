"""A user's subjects as cases: a ``.pte``, a module lowered with a recipe, an LLM config, saved artifacts, and the
inputs a method is called with; every problem with them is one line before any device work."""
