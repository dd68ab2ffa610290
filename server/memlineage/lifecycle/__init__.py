"""Lifecycle governance: the tiered sweep that archives and evicts memories."""
