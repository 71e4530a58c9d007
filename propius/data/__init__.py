"""Packaged data files (see README.md); a regular package so ``importlib.resources`` can read them
even while ``propius`` itself is a namespace package under an editable install."""
