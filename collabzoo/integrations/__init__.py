"""Adapters between collabzoo and third-party libraries, one module per library.

Each module imports its library at import time, so import only the one you use; the libraries
come with the `interop` extra: pip install "collabzoo[interop]".
"""
