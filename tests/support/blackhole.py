"""A TCP relay on loopback whose open connections can be made to go silent: what a
network partition or a host that vanished without a FIN looks like to a client (its
bytes are taken and never answered), for the keepalive tests."""

from __future__ import annotations

import socket
import threading
from types import TracebackType


class Blackhole:
    """Relays 127.0.0.1:`port` to `target` ("host:port"). `cut()` silences the
    connections open now: both ways, what arrives is read and dropped, and they stay
    open. Connections made after it are relayed again."""

    def __init__(self, target: str) -> None:
        host, _, port = target.rpartition(":")
        self._target = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._open: list[threading.Event] = []  # per connection: set once silenced
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            upstream = socket.create_connection(self._target)
            silent = threading.Event()
            with self._lock:
                self._open.append(silent)
                self._sockets += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst, silent), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, silent: threading.Event) -> None:
        while True:
            try:
                data = src.recv(65536)
                if not data:
                    return
                if not silent.is_set():
                    dst.sendall(data)
            except OSError:
                return

    def cut(self) -> None:
        with self._lock:
            for silent in self._open:
                silent.set()

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            for s in self._sockets:
                s.close()

    def __enter__(self) -> Blackhole:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
