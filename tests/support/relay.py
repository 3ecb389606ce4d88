"""A TCP relay in front of an HTTP server that can freeze one upload halfway through its body.

Used to SIGKILL a client at a known point of an upload (the crash tests of the archive on object storage):
once armed, the first PUT with a body whose path matches ``pattern`` is forwarded up to half of its body, then
nothing more is forwarded on that connection and ``stalled`` is set with the request's path.
"""

from __future__ import annotations

import re
import socket
import threading

_HEADERS = re.compile(rb"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/1\.1\r\n(?P<headers>.*?)\r\n\r\n", re.S)
_LENGTH = re.compile(rb"(?im)^content-length:\s*(\d+)\s*$")


class StallingRelay:
    def __init__(self, target_port: int, pattern: str) -> None:
        self.target_port = target_port
        self.pattern = re.compile(pattern.encode())
        self.armed = threading.Event()
        self.stalled = threading.Event()
        self.stalled_path = ""
        self._server = socket.create_server(("127.0.0.1", 0))
        self._sockets: list[socket.socket] = [self._server]
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.getsockname()[1]}"

    def close(self) -> None:
        """Drop every connection (the server sees a half-sent body end) and stop listening."""
        with self._lock:
            for sock in self._sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self._lock:
                self._sockets += [client, upstream]
            threading.Thread(target=self._requests, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass

    def _requests(self, client: socket.socket, upstream: socket.socket) -> None:
        """Client to server, request by request, forwarding bytes as they come (an `Expect: 100-continue`
        client must see its headers reach the server); only a matching request while armed is cut."""
        pending, request = b"", None  # request: [bytes left to forward, bytes left before the cut or None]
        try:
            while data := client.recv(65536):
                pending += data
                while pending:
                    if request is None:
                        request = self._parse(pending)
                        if request is None:
                            break  # headers not complete yet
                    size = min(len(pending), request[0] if request[1] is None else request[1])
                    upstream.sendall(pending[:size])
                    pending = pending[size:]
                    request[0] -= size
                    if request[1] is not None:
                        request[1] -= size
                        if request[1] == 0:
                            self.stalled.set()
                            return  # hold the connection open, forward nothing more
                    if request[0] == 0:
                        request = None
        except OSError:
            pass

    def _parse(self, pending: bytes) -> list | None:
        head = _HEADERS.match(pending)
        if head is None:
            return None
        length = _LENGTH.search(head["headers"])
        body = int(length[1]) if length else 0
        cut = None
        with self._lock:
            if (self.armed.is_set() and not self.stalled_path and head["method"] == b"PUT" and body > 1
                    and self.pattern.search(head["path"])):
                cut = head.end() + body // 2
                self.stalled_path = head["path"].decode()
        return [head.end() + body, cut]
