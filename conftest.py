# Puts the repository root on sys.path for the tests (pytest imports this file first).
