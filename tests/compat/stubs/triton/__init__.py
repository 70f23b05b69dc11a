"""Import stub for `make compat`: SGLang imports triton at module level (a ~0.9 GB GPU package)
but its argument parser never touches it."""
