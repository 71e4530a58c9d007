"""Content-addressed model checkpoints on disk: what a job's rounds need when Redis comes back empty.

Every published model and every closed round's aggregate is written here (``data_dir/checkpoints/<job>/
<sha256>``) before the round that uses it is recorded in SQL, so a durable round row never names a model
that only Redis held; once a round closes, only its model and aggregate are kept. Files are written to a
temporary name, fsynced and renamed: a crash leaves either the whole file or none. The content is
safetensors bytes, read back as bytes (never unpickled).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["Checkpoints"]


class Checkpoints:
    def __init__(self, root: Path) -> None:
        self._root = root

    def _path(self, job_id: str, digest: str) -> Path:
        if not digest.isalnum() or not job_id.isalnum():
            raise ValueError(f"not a checkpoint name: {job_id}/{digest}")
        return self._root / job_id / digest

    def save(self, job_id: str, digest: str, payload: bytes | bytearray | memoryview) -> None:
        """Store ``payload`` under its sha256 ``digest`` (once: the same content is never rewritten)."""
        path = self._path(job_id, digest)
        if path.exists():
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        with partial.open("wb") as file:
            file.write(payload)
            file.flush()
            os.fsync(file.fileno())
        partial.replace(path)

    def load(self, job_id: str, digest: str) -> bytes | None:
        """The checkpoint's bytes if it is on disk and intact, else None."""
        path = self._path(job_id, digest)
        if not path.exists():
            return None
        payload = path.read_bytes()
        return payload if hashlib.sha256(payload).hexdigest() == digest else None

    def keep_only(self, job_id: str, digests: set[str]) -> None:
        """Delete the job's other checkpoints: a recovery needs only its newest round's model and aggregate."""
        directory = self._root / job_id
        if not directory.is_dir():
            return
        for path in directory.iterdir():
            if path.name not in digests and not path.name.endswith(".partial"):
                path.unlink(missing_ok=True)
