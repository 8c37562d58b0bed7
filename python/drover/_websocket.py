"""A minimal WebSocket client (RFC 6455) for the server's two streams.

Only what the event stream and the log follow need: the upgrade handshake
with the bearer token, masked client frames, fragmented messages, ping ->
pong, and the close handshake. No extensions, no subprotocols.

Thread safety: one thread per WebSocket.
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import ssl
import struct
import time
from typing import Dict, Optional, Tuple

from ._connection import Transport, error_from_body
from .errors import ConnectionFailed, WaitTimeout

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_MAX_HEADER = 16 * 1024
_MAX_MESSAGE = 64 * 1024 * 1024

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0, 1, 2, 8, 9, 10


class Closed(Exception):
    """The WebSocket was closed; ``code`` and ``reason`` from the close frame
    (1006 and "" when the connection just dropped)."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"closed ({code}) {reason}".strip())
        self.code = code
        self.reason = reason


def _mask(key: bytes, data: bytes) -> bytes:
    n = len(data)
    if n == 0:
        return b""
    k = int.from_bytes((key * (n // 4 + 1))[:n], "big")
    return (int.from_bytes(data, "big") ^ k).to_bytes(n, "big")


class WebSocket:
    """One client WebSocket connection."""

    def __init__(self, sock: socket.socket, leftover: bytes) -> None:
        self._sock = sock
        self._buf = bytearray(leftover)
        self._closed = False
        # A fragmented message in progress (kept across a timeout).
        self._opcode = -1
        self._parts = bytearray()

    @classmethod
    def connect(cls, transport: Transport, target: str, timeout: Optional[float]) -> "WebSocket":
        """Opens ``target`` (a path with query) on the transport's server.

        Raises:
            ConnectionFailed: unreachable, or not a WebSocket answer.
            FingerprintMismatch: the certificate is not the pinned one.
            ApiError: the server refused the upgrade (wrong token: its
                AuthenticationError subclass).
        """
        sock = transport.connect_socket(timeout)
        ep = transport.endpoint
        key = base64.b64encode(os.urandom(16)).decode("ascii")
        request = (
            f"GET {target} HTTP/1.1\r\n"
            f"Host: {ep.address}\r\n"
            "Upgrade: websocket\r\n"
            "Connection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n"
            f"Authorization: Bearer {ep.token}\r\n"
            "\r\n"
        )
        ws = cls(sock, b"")
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            sock.sendall(request.encode("ascii"))
            status, headers = ws._read_head(deadline)
            if status != 101:
                length = int(headers.get("content-length", "0") or "0")
                body = bytes(ws._read_exact(min(length, _MAX_HEADER), deadline)) if length else b""
                raise error_from_body(status, body)
            accept = base64.b64encode(hashlib.sha1(key.encode("ascii") + _GUID).digest())
            if headers.get("sec-websocket-accept", "").encode("ascii") != accept:
                raise ConnectionFailed(f"{target}: the server's WebSocket accept key is wrong")
        except BaseException:
            sock.close()
            raise
        return ws

    def _fill(self, deadline: Optional[float]) -> None:
        if deadline is None:
            self._sock.settimeout(None)
        else:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeout("timed out")
            self._sock.settimeout(left)
        try:
            chunk = self._sock.recv(65536)
        except socket.timeout:
            raise WaitTimeout("timed out") from None
        except OSError as e:
            raise Closed(1006, str(e)) from None
        if not chunk:
            raise Closed(1006, "connection closed")
        self._buf += chunk

    def fileno(self) -> int:
        return self._sock.fileno()

    def buffered_by_tls(self) -> bool:
        """Whether decrypted bytes wait inside the TLS layer (select() does
        not see those)."""
        pending = getattr(self._sock, "pending", None)
        return bool(pending is not None and pending())

    def feed(self) -> None:
        """Reads what the socket holds now, without blocking; recv() with a
        past deadline then returns the whole messages among it.

        Raises:
            Closed: the connection dropped.
        """
        self._sock.setblocking(False)
        try:
            chunk = self._sock.recv(65536)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return
        except OSError as e:
            raise Closed(1006, str(e)) from None
        if not chunk:
            raise Closed(1006, "connection closed")
        self._buf += chunk

    def _read_exact(self, n: int, deadline: Optional[float]) -> bytearray:
        while len(self._buf) < n:
            self._fill(deadline)
        out = self._buf[:n]
        del self._buf[:n]
        return out

    def _read_head(self, deadline: Optional[float]) -> Tuple[int, Dict[str, str]]:
        while True:
            end = self._buf.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(self._buf) > _MAX_HEADER:
                raise ConnectionFailed("the server's WebSocket answer header is too long")
            try:
                self._fill(deadline)
            except Closed as e:
                raise ConnectionFailed(f"the server closed the connection: {e.reason}") from None
        head = bytes(self._buf[:end]).decode("latin-1")
        del self._buf[: end + 4]
        lines = head.split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[1].isdigit():
            raise ConnectionFailed(f"not an HTTP answer: {lines[0]!r}")
        headers: Dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return int(parts[1]), headers

    def _send_frame(self, opcode: int, payload: bytes) -> None:
        self._sock.settimeout(10.0)
        self._sock.sendall(self._frame(opcode, payload))

    def send_texts(self, texts: "list[str]") -> None:
        """Several text messages in one write."""
        if texts:
            self._sock.settimeout(10.0)
            self._sock.sendall(b"".join(self._frame(OP_TEXT, t.encode("utf-8")) for t in texts))

    @staticmethod
    def _frame(opcode: int, payload: bytes) -> bytes:
        n = len(payload)
        head = bytearray([0x80 | opcode])
        if n < 126:
            head.append(0x80 | n)
        elif n < 65536:
            head.append(0x80 | 126)
            head += struct.pack(">H", n)
        else:
            head.append(0x80 | 127)
            head += struct.pack(">Q", n)
        key = os.urandom(4)
        return bytes(head) + key + _mask(key, payload)

    def send_text(self, text: str) -> None:
        self._send_frame(OP_TEXT, text.encode("utf-8"))

    def recv(self, deadline: Optional[float] = None) -> Tuple[int, bytes]:
        """The next data message: (OP_TEXT or OP_BINARY, payload).

        ``deadline`` is a time.monotonic() value, None for no limit.
        Answers pings on the way.

        Raises:
            Closed: the server closed (or the connection dropped).
            WaitTimeout: the deadline passed (the socket stays usable).
        """
        if self._closed:
            raise Closed(1006, "already closed")
        while True:
            b0, b1 = self._peek_header(deadline)
            fin, op = b0 & 0x80, b0 & 0x0F
            n = b1 & 0x7F
            need = 2 + (2 if n == 126 else 8 if n == 127 else 0) + (4 if b1 & 0x80 else 0)
            while len(self._buf) < need:
                self._fill(deadline)
            pos = 2
            if n == 126:
                (n,) = struct.unpack_from(">H", self._buf, 2)
                pos = 4
            elif n == 127:
                (n,) = struct.unpack_from(">Q", self._buf, 2)
                pos = 10
            if n > _MAX_MESSAGE or len(self._parts) + n > _MAX_MESSAGE:
                self.close(1009, "message too big")
                raise Closed(1009, "message too big")
            mask = bytes(self._buf[pos : pos + 4]) if b1 & 0x80 else b""
            while len(self._buf) < need + n:
                self._fill(deadline)
            payload = bytes(self._buf[need : need + n])
            del self._buf[: need + n]
            if mask:
                payload = _mask(mask, payload)
            if op == OP_PING:
                self._send_frame(OP_PONG, payload)
                continue
            if op == OP_PONG:
                continue
            if op == OP_CLOSE:
                code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else 1005
                reason = payload[2:].decode("utf-8", "replace")
                self.close(code if code not in (1005, 1006) else 1000)
                raise Closed(code, reason)
            if op != OP_CONT:
                self._opcode = op
            self._parts += payload
            if fin:
                message = bytes(self._parts)
                self._parts.clear()
                return self._opcode, message

    def _peek_header(self, deadline: Optional[float]) -> Tuple[int, int]:
        while len(self._buf) < 2:
            self._fill(deadline)
        return self._buf[0], self._buf[1]

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Sends a close frame (best effort) and closes the socket."""
        if self._closed:
            return
        self._closed = True
        try:
            self._send_frame(OP_CLOSE, struct.pack(">H", code) + reason.encode("utf-8")[:120])
        except OSError:
            pass
        try:
            self._sock.close()
        except OSError:
            pass
