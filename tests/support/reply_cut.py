"""A loopback TCP proxy in front of a real redis-server that, when armed, lets the
next request holding a marker reach Redis, reads Redis's reply and then closes the
client's connection instead of passing the reply on: a connection broken after the
server applied the command (a proxy, a load balancer, `CLIENT KILL`, an output-buffer
limit). One request and reply at a time per connection, as redis-py's sync client."""

from __future__ import annotations

import socket
import threading
import time


class ReplyCutProxy:
    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port: int = self.listener.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.cuts = 0
        self._armed: bytes | None = None
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, marker: bytes) -> None:
        """Cut the reply of the next request that holds `marker`."""
        with self._lock:
            self._armed = marker

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target, timeout=10)
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        try:
            while True:
                data = client.recv(1 << 20)
                if not data:
                    return
                upstream.sendall(data)
                with self._lock:
                    cut = self._armed is not None and self._armed in data
                    if cut:
                        self._armed = None
                        self.cuts += 1
                reply = upstream.recv(1 << 20)  # applied: Redis answered
                if cut:
                    time.sleep(0.05)
                    return  # the client never sees the reply
                upstream.settimeout(0.01)  # the rest of a long reply
                try:
                    while more := upstream.recv(1 << 20):
                        reply += more
                except (TimeoutError, BlockingIOError):
                    pass
                upstream.settimeout(10)
                client.sendall(reply)
        except OSError:
            return
        finally:
            client.close()
            upstream.close()
