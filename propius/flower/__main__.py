"""``python -m propius.flower run APP_DIR ...``: the same as ``propius flower run``."""

from propius.flower.cli import app

app()
