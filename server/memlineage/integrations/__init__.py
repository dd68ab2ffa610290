"""Adapters that put MemLineage's checks inside agent frameworks' own store interfaces.

Each adapter is a module of its own, importable only with its framework installed
(``pip install -e '.[langgraph]' (in the repository)`` for `langgraph_store`), so importing this
package needs nothing beyond the client. Like the client, an adapter imports no
server module: only `memlineage.client`, the generated `memlineage.v1` and its
framework (docs/architecture.md, docs/integrations.md).
"""
