"""Mem0 running offline for tests and benches: a deterministic embedder served on
loopback as the OpenAI embeddings API answers (Mem0's embedder config accepts only
its built-in providers), and Mem0's own config with a local Qdrant and history db."""

from __future__ import annotations

import atexit
import json
import math
import os
import re
import shutil
import tempfile
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# Mem0 reads these when it is imported: no telemetry, nothing under ~/.mem0. Import
# this module before mem0. The directory goes when the process ends (before: one
# was left in the temp dir by every process that imported Mem0 here).
os.environ["MEM0_TELEMETRY"] = "False"
if "MEM0_DIR" not in os.environ:
    os.environ["MEM0_DIR"] = tempfile.mkdtemp(prefix="mem0-home-")
    atexit.register(shutil.rmtree, os.environ["MEM0_DIR"], ignore_errors=True)

DIMS = 64

REFUSED = "embedder-refuses-this"
"""A text holding this is refused by the embedder (HTTP 400, as the OpenAI API answers
an input it will not embed; the client does not retry it): Mem0 fails inside ``add``
after storing the messages before it."""


def bag_of_words(text: str) -> list[float]:
    """Hashed words, L2-normalised: same text, same vector; shared words, closer."""
    v = [0.0] * DIMS
    for word in re.findall(r"\w+", text.lower()):
        v[zlib.crc32(word.encode()) % DIMS] += 1.0
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / norm for x in v] if any(v) else [1.0] + [0.0] * (DIMS - 1)


class _Embeddings(BaseHTTPRequestHandler):
    """POST /v1/embeddings as the OpenAI API answers it."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        if any(REFUSED in t for t in texts):
            self._answer(400, {"error": {"message": "refused", "type": "invalid_request_error"}})
            return
        answer = {
            "object": "list",
            "model": body.get("model", "bow"),
            "data": [
                {"object": "embedding", "index": i, "embedding": bag_of_words(t)}
                for i, t in enumerate(texts)
            ],
            "usage": {"prompt_tokens": 0, "total_tokens": 0},
        }
        self._answer(200, answer)

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        answer = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def embedder() -> Iterator[str]:
    """The loopback embedder's base URL while the block runs."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Embeddings)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def mem0_config(tmp_path: Path, url: str) -> dict[str, Any]:
    """Mem0's own config: local Qdrant, local history db, the loopback embedder."""
    return {
        "vector_store": {
            "provider": "qdrant",
            "config": {
                "collection_name": "memories",
                "path": str(tmp_path / "qdrant"),
                "embedding_model_dims": DIMS,
                "on_disk": True,
            },
        },
        "embedder": {
            "provider": "openai",
            "config": {
                "model": "bow",
                "api_key": "offline",
                "openai_base_url": url,
                "embedding_dims": DIMS,
            },
        },
        # Built by Memory() but never called: every add here is infer=False.
        "llm": {"provider": "openai", "config": {"api_key": "offline", "openai_base_url": url}},
        "history_db_path": str(tmp_path / "history.db"),
    }
