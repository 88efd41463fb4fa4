"""The exception every call raises for a failed RPC."""
from __future__ import annotations

from typing import Optional

import grpc


class ParityError(Exception):
    """A call parityd (or the connection to it) refused or failed.

    ``code`` is the gRPC status code (``grpc.StatusCode.NOT_FOUND``, ...), ``message`` the
    daemon's own text, naming the field and the value it refused.
    """

    def __init__(self, code: grpc.StatusCode, message: str, what: str = ""):
        self.code = code
        self.message = message
        self.what = what
        super().__init__("%s%s (%s)" % (what + ": " if what else "", message, code.name))

    @classmethod
    def from_rpc(cls, e: grpc.RpcError, what: str = "") -> "ParityError":
        code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
        details = e.details() if hasattr(e, "details") else str(e)
        return cls(code or grpc.StatusCode.UNKNOWN, details or "", what)


def ended_by_parityd(call) -> bool:
    """Whether the daemon itself ended a stream (its trailer), rather than gRPC or the network."""
    try:
        md = call.trailing_metadata() or ()
    except Exception:  # noqa: BLE001 - a call that never started has none
        return False
    return any(k == "parityd-ended" for k, _ in md)


def retryable(code: Optional[grpc.StatusCode], by_parityd: bool) -> bool:
    """A failure the upload resumes from: the connection, or a gRPC memory quota's cancel."""
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED):
        return True
    return code == grpc.StatusCode.RESOURCE_EXHAUSTED and not by_parityd
