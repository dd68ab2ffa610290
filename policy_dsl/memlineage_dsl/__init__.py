"""The `.mlp` policy language: parse, check, format, compile, evaluate, test.

Imports nothing from the sidecar (`memlineage`); it needs no network or Redis.
"""
