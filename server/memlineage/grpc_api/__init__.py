"""The gRPC adapter: message conversion, auth, servicers, server bootstrap.

Servicers translate messages and call the engine; no decision logic lives here.
"""
