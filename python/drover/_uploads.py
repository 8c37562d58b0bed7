"""Files from the client: uploads the local files a job names in its tasks'
``input_files`` to the server's file store (``PUT /api/v1/files/{sha256}``,
only when ``HEAD`` says the server lacks it) and names them there by
``{"name", "size", "sha256"}``, as ``drover submit --input`` does."""

import hashlib
import os
from typing import Any, Dict, List, Tuple

from ._connection import Transport, error_from_body
from .errors import api_error


def _hash(path: str) -> Tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            size += len(chunk)
            digest.update(chunk)
    return digest.hexdigest(), size


def _upload(transport: Transport, path: str, sha: str, size: int) -> bool:
    """Sends the file unless the server has it; True when it was sent."""
    headers = {"Authorization": f"Bearer {transport.endpoint.token}"}
    target = f"/api/v1/files/{sha}"
    conn = transport._new_connection()
    try:
        conn.request("HEAD", target, headers=headers)
        resp = conn.getresponse()
        resp.read()
        if 200 <= resp.status < 300:
            return False
        if resp.status != 404:
            raise error_from_body(resp.status, b"")
        with open(path, "rb") as body:
            conn.request("PUT", target, body=body, headers={
                **headers, "Content-Type": "application/octet-stream",
                "Content-Length": str(size)})
            resp = conn.getresponse()
            data = resp.read()
        if not 200 <= resp.status < 300:
            raise error_from_body(resp.status, data)
        return True
    finally:
        conn.close()


def upload_input_files(transport: Transport, body: Dict[str, Any]) -> None:
    """Replaces each path in ``body``'s tasks' ``input_files`` with the
    uploaded file ({name: its last part, size, sha256})."""
    for task in body.get("task", []):
        files = task.get("input_files")
        if not files:
            continue
        out: List[Any] = []
        for f in files:
            if not isinstance(f, (str, os.PathLike)):
                out.append(f)  # uploaded already
                continue
            path = os.fspath(f)
            try:
                sha, size = _hash(path)
                _upload(transport, path, sha, size)
            except OSError as e:
                raise api_error("invalid_argument", f"input file {path}: {e}") from None
            out.append({"name": os.path.basename(path), "size": size, "sha256": sha})
        task["input_files"] = out
