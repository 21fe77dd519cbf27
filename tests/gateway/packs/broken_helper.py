"""A local pack whose function raises, to show a pack bug reaches the model as a ToolError."""


def divide(a: float, b: float) -> float:
    """a / b."""
    return a / b
