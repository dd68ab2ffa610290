"""Generated protobuf/gRPC code for memlineage.v1 (see scripts/gen_proto.py)."""
