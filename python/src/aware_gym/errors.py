"""Typed errors for the environment service; each one's text names the gRPC status."""

from __future__ import annotations

import grpc


class AwareEnvError(RuntimeError):
    """A call to the environment service failed.

    ``code`` is the :class:`grpc.StatusCode`; ``details`` the server's message. ``str(err)`` reads
    ``"<call>: <STATUS_NAME>: <details>"``, e.g. ``"Make: UNAUTHENTICATED: invalid bearer token"``.
    """

    def __init__(self, call: str, code: grpc.StatusCode, details: str):
        self.call = call
        self.code = code
        self.details = details
        super().__init__(f"{call}: {code.name}: {details}")


class AuthenticationError(AwareEnvError):
    """UNAUTHENTICATED: the token is missing or wrong."""


class InvalidRequestError(AwareEnvError, ValueError):
    """INVALID_ARGUMENT / OUT_OF_RANGE: an action, seed or config the server refused."""


class SessionNotFoundError(AwareEnvError):
    """NOT_FOUND: the session is unknown, closed or expired after idling."""


class NeedsResetError(AwareEnvError):
    """FAILED_PRECONDITION: step after the episode ended, or a call the session cannot serve."""


class ResourceExhaustedError(AwareEnvError):
    """RESOURCE_EXHAUSTED: the server's session limit, or a message over its size limit."""


class ServiceUnavailableError(AwareEnvError, ConnectionError):
    """UNAVAILABLE / DEADLINE_EXCEEDED: the server cannot be reached in time."""


_BY_CODE = {
    grpc.StatusCode.UNAUTHENTICATED: AuthenticationError,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequestError,
    grpc.StatusCode.OUT_OF_RANGE: InvalidRequestError,
    grpc.StatusCode.NOT_FOUND: SessionNotFoundError,
    grpc.StatusCode.FAILED_PRECONDITION: NeedsResetError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.UNAVAILABLE: ServiceUnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: ServiceUnavailableError,
}


def from_rpc_error(call: str, err: grpc.RpcError) -> AwareEnvError:
    """The typed error for a failed call."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    details = err.details() if hasattr(err, "details") else str(err)
    cls = _BY_CODE.get(code, AwareEnvError)
    return cls(call, code, details or "")
