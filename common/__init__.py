"""Shared pieces of the project: reference models, problem registry, inputs, accuracy rule, timing."""
