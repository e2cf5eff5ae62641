"""A TCP proxy on loopback that breaks things on request, between the SDK and a real exchange.

- :meth:`FaultProxy.cut_all` cuts every connection through it at once (a network failure).
- :meth:`FaultProxy.drop_responses` lets the next requests reach the exchange, which acts on them,
  and cuts each connection as its answer starts to come back: the client never sees it.
- :meth:`FaultProxy.drop_ws_message` removes one message the exchange sends on a WebSocket (a
  text frame whose payload matches), forwarding everything else: a gap in the feed as a client
  would see one.
"""

from __future__ import annotations

import socket
import struct
import threading
from typing import Callable, Optional


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._lock = threading.Lock()
        self._socks: set[socket.socket] = set()
        self._drop_responses = 0
        self._drop_ws: Optional[Callable[[bytes], bool]] = None
        #: How many connections were accepted, answers dropped and WebSocket messages removed.
        self.accepted = 0
        self.dropped_responses = 0
        self.dropped_ws = 0
        self._closed = False
        self._refusing = False
        threading.Thread(target=self._accept, daemon=True).start()

    def cut_all(self) -> int:
        """Cuts every open connection; returns how many pairs were cut."""
        with self._lock:
            socks = list(self._socks)
            self._socks.clear()
        for s in socks:
            _shut(s)
        return len(socks) // 2

    def refuse(self, on: bool) -> None:
        """While on, every new connection is closed at once, as if the exchange were unreachable."""
        with self._lock:
            self._refusing = on

    def drop_responses(self, n: int = 1) -> None:
        with self._lock:
            self._drop_responses += n

    def drop_ws_message(self, match: Callable[[bytes], bool]) -> None:
        """Removes the next server-to-client WebSocket text message for which match(payload) holds."""
        with self._lock:
            self._drop_ws = match

    def close(self) -> None:
        self._closed = True
        _shut(self._listener)
        self.cut_all()

    # --- the plumbing ---------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                refusing = self._refusing
            if refusing:
                _shut(client)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=10)
                server.settimeout(None)
            except OSError:
                _shut(client)
                continue
            with self._lock:
                self.accepted += 1
                self._socks.update((client, server))
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, from_server: bool) -> None:
        buf = b""
        websocket = False
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if not from_server:
                    dst.sendall(data)
                    continue
                if not websocket:
                    if data.startswith(b"HTTP/1.1 101"):
                        websocket = True
                        head, sep, rest = data.partition(b"\r\n\r\n")
                        assert sep, "the 101 answer's headers came in pieces"  # never, in practice
                        assert b"permessage-deflate" not in head.lower(), "the feed negotiated compression"
                        dst.sendall(head + sep)
                        buf = rest
                    else:
                        with self._lock:
                            drop = self._drop_responses > 0
                            if drop:
                                self._drop_responses -= 1
                                self.dropped_responses += 1
                        if drop:
                            break
                        dst.sendall(data)
                        continue
                else:
                    buf += data
                buf = self._frames(buf, dst)
        except OSError:
            pass
        finally:
            with self._lock:
                self._socks.discard(src)
                self._socks.discard(dst)
            _shut(src)
            _shut(dst)

    def _frames(self, buf: bytes, dst: socket.socket) -> bytes:
        """Forwards the whole frames in buf (minus one dropped message); returns the rest."""
        while True:
            if len(buf) < 2:
                return buf
            b0, b1 = buf[0], buf[1]
            length, offset = b1 & 0x7F, 2
            if length == 126:
                if len(buf) < 4:
                    return buf
                length, offset = struct.unpack("!H", buf[2:4])[0], 4
            elif length == 127:
                if len(buf) < 10:
                    return buf
                length, offset = struct.unpack("!Q", buf[2:10])[0], 10
            if b1 & 0x80:
                offset += 4  # a masked frame: never from a server, but keep the framing right
            end = offset + length
            if len(buf) < end:
                return buf
            frame, buf = buf[:end], buf[end:]
            fin, opcode = b0 & 0x80, b0 & 0x0F
            with self._lock:
                match = self._drop_ws
                if match is not None and fin and opcode == 1 and match(frame[offset:]):
                    self._drop_ws = None
                    self.dropped_ws += 1
                    continue
            dst.sendall(frame)


def _shut(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass
