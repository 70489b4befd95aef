"""Optimizers for embedding tables: dense Adam, lazy Adam, Adagrad and row-wise Adagrad, SGD."""
