"""Where the server is, and HTTP to it over TLS pinned to a fingerprint.

The lookup follows the CLI (src/cli/connection.h):

1. an explicit address (``Client("host:7210", token=..., fingerprint=...)``,
   or ``Client("host", 7210, ...)``, or ``tls=False`` for a ``--no-tls``
   server); without ``token=`` the access file (below) supplies the token
   and fingerprint when it names the same server (``localhost`` and
   ``127.0.0.1`` are one);
2. otherwise the access file: the ``access_file`` argument, then
   ``$DROVER_ACCESS``, then ``$XDG_STATE_HOME/drover/access.json``, then
   ``~/.local/state/drover/access.json``. A token or fingerprint given with
   an access file overrides its value.

The server's certificate is self-signed: TLS is set up without CA checks and
the SHA-256 of the certificate (DER) is compared with the pinned fingerprint
right after the handshake, before anything, the token included, is sent.
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.client
import json
import os
import re
import socket
import ssl
import threading
import urllib.parse
from typing import Any, Callable, Mapping, Optional, Tuple

from .errors import (
    AccessError,
    ApiError,
    ConnectionFailed,
    FingerprintMismatch,
    api_error,
    code_for_http_status,
)

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def normalize_fingerprint(text: str, where: str = "fingerprint") -> str:
    """64 lower-case hex digits from ``text`` (``AA:BB:...`` accepted).

    Raises:
        AccessError: ``text`` is not a SHA-256 fingerprint.
    """
    fp = text.replace(":", "").strip().lower()
    if not _HEX64.match(fp):
        raise AccessError(
            f"{where}: expected the SHA-256 of the server certificate (64 hex digits), "
            f"got {text!r}"
        )
    return fp


def split_host_port(address: str) -> Tuple[str, int]:
    """``"host:7210"`` or ``"[::1]:7210"`` -> (host, port).

    Raises:
        AccessError: the address is malformed.
    """
    if address.startswith("["):
        close = address.find("]")
        if close < 0 or address[close + 1 : close + 2] != ":":
            raise AccessError(f'address "{address}" must look like [::1]:7210')
        host, port_text = address[1:close], address[close + 2 :]
    else:
        host, sep, port_text = address.rpartition(":")
        if not sep or not host:
            raise AccessError(f'address "{address}" must look like host:port')
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise AccessError(f'address "{address}" has an invalid port "{port_text}"')
    return host, int(port_text)


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """A server and how to authenticate to it."""

    host: str
    port: int
    token: str = dataclasses.field(repr=False)
    fingerprint: str  # lower-case hex; "" when tls is False
    tls: bool = True
    # The access file the address came from ("" when given directly).
    origin: str = dataclasses.field(default="", compare=False)

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def unreachable(self, error: Exception) -> str:
        """Why a connection to it failed; for a refused one whose address
        came from an access file, usually a server that stopped and left
        its file behind, the file and what to do."""
        text = f"cannot reach the drover server at {self.address}: {error}"
        if self.origin and isinstance(error, ConnectionRefusedError):
            text += (f" (the address is from {self.origin}: is its server still running? "
                     "Start one with `drover up`, or pass access_file= or an address)")
        return text


def default_access_path() -> str:
    """``$XDG_STATE_HOME/drover/access.json`` or ``~/.local/state/...``."""
    xdg = os.environ.get("XDG_STATE_HOME")
    if xdg:
        return os.path.join(xdg, "drover", "access.json")
    home = os.environ.get("HOME")
    if home:
        return os.path.join(home, ".local", "state", "drover", "access.json")
    raise AccessError(
        "cannot find the access file: neither XDG_STATE_HOME nor HOME is set; pass "
        "access_file= or set DROVER_ACCESS"
    )


def resolve_access_path(explicit: Optional[str]) -> str:
    """``explicit``, else ``$DROVER_ACCESS``, else the default path."""
    if explicit:
        return explicit
    env = os.environ.get("DROVER_ACCESS")
    if env:
        return env
    return default_access_path()


def read_access_file(path: str) -> Endpoint:
    """Reads and checks an access file.

    Raises:
        AccessError: the file is missing (saying how to get one), not JSON,
            or lacks a field; every message starts with the path.
    """
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise AccessError(
            f"no access file at {path}: start `drover up` or `drover server` on this machine, "
            "or pass Client('HOST:PORT', token=..., fingerprint=...)"
        ) from None
    except OSError as e:
        raise AccessError(f"{path}: {e.strerror}") from None
    try:
        data = json.loads(text)
    except ValueError:
        raise AccessError(f"{path}: not valid JSON") from None
    if not isinstance(data, dict):
        raise AccessError(f"{path}: expected a JSON object")

    def field(key: str, kind: type) -> Any:
        if key not in data:
            raise AccessError(f'{path}: missing field "{key}"')
        if not isinstance(data[key], kind):
            raise AccessError(f'{path}: field "{key}" must be a {kind.__name__}')
        return data[key]

    address = field("address", str)
    token = field("token", str)
    fingerprint = field("fingerprint", str)
    tls = field("tls", bool)
    if not token:
        raise AccessError(f'{path}: field "token" is empty')
    try:
        host, port = split_host_port(address)
    except AccessError as e:
        raise AccessError(f'{path}: field "address": {e}') from None
    if tls:
        fingerprint = normalize_fingerprint(fingerprint, f'{path}: field "fingerprint"')
    return Endpoint(host, port, token, fingerprint if tls else "", tls, origin=path)


_LOOPBACK = {"localhost", "127.0.0.1", "::1", "ip6-localhost"}


def same_server(host_a: str, port_a: int, host_b: str, port_b: int) -> bool:
    """Whether two addresses name one server: the same port, and the same
    host or two loopback names (``localhost`` and ``127.0.0.1``)."""
    if port_a != port_b:
        return False
    a, b = host_a.lower(), host_b.lower()
    return a == b or (a in _LOOPBACK and b in _LOOPBACK) or (
        a.startswith("127.") and b in _LOOPBACK) or (b.startswith("127.") and a in _LOOPBACK)


def resolve_endpoint(
    address: Optional[str],
    token: Optional[str],
    fingerprint: Optional[str],
    tls: Optional[bool],
    access_file: Optional[str],
) -> Endpoint:
    """Applies the lookup order in the module docstring.

    Raises:
        AccessError: what is missing or malformed, and where.
    """
    if address:
        host, port = split_host_port(address)
        if not token:
            # The access file of the server named here, when it names the
            # same server, has the token (and the fingerprint).
            try:
                ep = read_access_file(resolve_access_path(access_file))
            except AccessError as e:
                raise AccessError(
                    f"{address}: an explicit address needs token= (no access file for it: {e})"
                ) from None
            if not same_server(ep.host, ep.port, host, port):
                raise AccessError(
                    f"{address}: an explicit address needs token= (the access file is for "
                    f"{ep.address})"
                )
            if fingerprint:
                ep = dataclasses.replace(ep, fingerprint=normalize_fingerprint(fingerprint))
            if tls is not None and tls != ep.tls:
                raise AccessError(
                    f"tls={tls} contradicts the access file, which says {ep.address} uses "
                    f"{'TLS' if ep.tls else 'plain TCP'}"
                )
            return ep
        if access_file:
            raise AccessError("give an address or access_file=, not both")
        use_tls = True if tls is None else tls
        if use_tls and not fingerprint:
            raise AccessError(
                f"{address}: an explicit address needs fingerprint= (or tls=False for a "
                "--no-tls server)"
            )
        fp = normalize_fingerprint(fingerprint) if use_tls and fingerprint else ""
        return Endpoint(host, port, token, fp, use_tls)
    ep = read_access_file(resolve_access_path(access_file))
    if token:
        ep = dataclasses.replace(ep, token=token)
    if fingerprint:
        ep = dataclasses.replace(ep, fingerprint=normalize_fingerprint(fingerprint))
    if tls is not None and tls != ep.tls:
        raise AccessError(
            f"tls={tls} contradicts the access file, which says the server uses "
            f"{'TLS' if ep.tls else 'plain TCP'}"
        )
    return ep


def _tls_context() -> ssl.SSLContext:
    # The certificate is self-signed and pinned by fingerprint (checked by
    # check_pin), so there is no CA chain or host name to verify.
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def check_pin(sock: ssl.SSLSocket, endpoint: Endpoint) -> None:
    """Raises FingerprintMismatch (closing ``sock``) unless the peer's
    certificate is the pinned one."""
    der = sock.getpeercert(binary_form=True)
    actual = hashlib.sha256(der).hexdigest() if der else "(no certificate)"
    if actual != endpoint.fingerprint:
        sock.close()
        raise FingerprintMismatch(endpoint.address, endpoint.fingerprint, actual)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """HTTPS whose every (re)connect checks the pinned fingerprint."""

    def __init__(self, endpoint: Endpoint, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(endpoint.host, endpoint.port, timeout=timeout, context=context)
        self._endpoint = endpoint

    def connect(self) -> None:
        super().connect()
        assert isinstance(self.sock, ssl.SSLSocket)
        check_pin(self.sock, self._endpoint)


def error_from_body(status: int, body: bytes) -> ApiError:
    """The exception for an HTTP error answer (JSON error body or not)."""
    try:
        data = json.loads(body.decode("utf-8"))
        err = data["error"]
        field = err.get("field")
        return api_error(
            str(err["code"]), str(err["message"]), str(field) if field else None, status
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        text = body.decode("utf-8", "replace").strip() or f"HTTP {status}"
        return api_error(code_for_http_status(status), text, None, status)


# Errors meaning "the kept-alive connection was already closed by the server".
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)


class Transport:
    """Blocking HTTP requests to one server, over one kept-alive connection.

    Thread safety: requests are serialized by a lock, so one Transport may be
    shared by threads; WebSocket sockets (connect_socket) are independent.
    """

    def __init__(self, endpoint: Endpoint, timeout: float = 30.0) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self._ctx = _tls_context() if endpoint.tls else None
        self._conn: Optional[http.client.HTTPConnection] = None
        self._used = False
        self._lock = threading.Lock()
        # Called before each request (the Client: wait for submissions in
        # flight, so that a read sees them).
        self.before_request: Optional[Callable[[], None]] = None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _new_connection(self) -> http.client.HTTPConnection:
        if self._ctx is not None:
            return _PinnedHTTPSConnection(self.endpoint, self.timeout, self._ctx)
        return http.client.HTTPConnection(
            self.endpoint.host, self.endpoint.port, timeout=self.timeout
        )

    def request(
        self,
        method: str,
        path: str,
        body: Optional[Any] = None,
        query: Optional[Mapping[str, Any]] = None,
    ) -> Tuple[bytes, str]:
        """Sends a request and returns (body, content type) of a 2xx answer.

        ``body`` is sent as JSON. Raises the ApiError subclass for the
        server's error, ConnectionFailed when it cannot be reached.
        """
        if self.before_request is not None:
            self.before_request()
        target = path
        if query:
            q = {k: str(v) for k, v in query.items() if v is not None}
            if q:
                target += "?" + urllib.parse.urlencode(q)
        payload = json.dumps(body).encode("utf-8") if body is not None else None
        headers = {"Authorization": f"Bearer {self.endpoint.token}", "Accept": "application/json"}
        if payload is not None:
            headers["Content-Type"] = "application/json"
        with self._lock:
            for attempt in (0, 1):
                if self._conn is None:
                    self._conn = self._new_connection()
                    self._used = False
                reused = self._used
                try:
                    self._conn.request(method, target, body=payload, headers=headers)
                    resp = self._conn.getresponse()
                    data = resp.read()
                except FingerprintMismatch:
                    self._conn = None
                    raise
                except _STALE as e:
                    self._conn.close()
                    self._conn = None
                    # A request on a connection the server had already closed
                    # as idle was never read: send it again on a new one.
                    if reused and attempt == 0:
                        continue
                    raise ConnectionFailed(f"{self.endpoint.address}: connection lost: {e}") from e
                except (OSError, http.client.HTTPException) as e:
                    self._conn.close()
                    self._conn = None
                    raise ConnectionFailed(self.endpoint.unreachable(e)) from e
                self._used = True
                if resp.will_close:
                    self._conn.close()
                    self._conn = None
                if resp.status >= 400:
                    raise error_from_body(resp.status, data)
                return data, resp.getheader("Content-Type", "")
        raise AssertionError("unreachable")

    def json(
        self,
        method: str,
        path: str,
        body: Optional[Any] = None,
        query: Optional[Mapping[str, Any]] = None,
    ) -> Any:
        """request() and decode its JSON answer."""
        data, _ = self.request(method, path, body, query)
        try:
            return json.loads(data.decode("utf-8"))
        except ValueError as e:
            raise ConnectionFailed(f"{path}: the server's answer is not JSON: {e}") from None

    def connect_socket(self, timeout: Optional[float]) -> socket.socket:
        """A new connected socket (TLS-wrapped and pinned when TLS is on)."""
        ep = self.endpoint
        try:
            raw = socket.create_connection((ep.host, ep.port), timeout=timeout)
        except OSError as e:
            raise ConnectionFailed(ep.unreachable(e)) from e
        # A WebSocket's small frames go at once (no Nagle wait for the
        # server's delayed acknowledgment: 40 ms a message).
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._ctx is None:
            return raw
        try:
            tls = self._ctx.wrap_socket(raw, server_hostname=ep.host)
        except (OSError, ssl.SSLError) as e:
            raw.close()
            raise ConnectionFailed(f"TLS handshake with {ep.address} failed: {e}") from e
        check_pin(tls, ep)
        return tls
