"""Client: one gRPC channel to a sandgate gateway and the tenant's
credentials (see config.py). It owns the channel and turns every failed call
into a SandgateError; the sandbox API (Sandbox, ...) lives in sandbox.py.

A Client is thread-safe; share one among all the sandboxes of an agent
service. Sandbox.create(...) without client= makes a private one and closes
it with the sandbox.
"""
from typing import Any, Generator, Optional

import grpc

from . import _rpc
from .config import ConnectionConfig
from .errors import from_rpc_error


class Client:
    """Connection to the gateway.

    Args:
        addr: "host:port" (default $SANDGATE_ADDR, else 127.0.0.1:7443).
        api_key: tenant API key (default $SANDGATE_API_KEY).
        user_id: default end-user id (default $SANDGATE_USER).
        tls, root_certificates, client_cert, client_key, server_name: TLS and
            mTLS (PEM bytes or file paths); see ConnectionConfig.
        timeout: default deadline for unary calls, in seconds.
    """

    def __init__(self, addr: Optional[str] = None, api_key: Optional[str] = None, *,
                 config: Optional[ConnectionConfig] = None, **kw: Any):
        if config is None:
            config = ConnectionConfig(addr=addr, api_key=api_key, **kw)
        elif addr or api_key or kw:
            raise TypeError("sandgate.Client: pass config= or keyword settings, not both")
        self.config = config.resolve()
        self.addr: str = self.config.addr or ""
        self.pb = _rpc.pb
        self._metadata = self.config.metadata()
        creds = self.config.credentials()
        opts = self.config.channel_options()
        if creds is None:
            self._channel = grpc.insecure_channel(self.addr, options=opts)
        else:
            self._channel = grpc.secure_channel(self.addr, creds, options=opts)
        self._calls = _rpc.bind(self._channel)

    @property
    def user_id(self) -> Optional[str]:
        return self.config.user_id

    def __repr__(self) -> str:
        return "Client(%r)" % self.addr

    def unary(self, method: str, request: Any, timeout: Optional[float] = None) -> Any:
        """Call a unary RPC by name, e.g. unary("GetSandbox", req); returns
        the reply or raises SandgateError."""
        try:
            return self._calls[method](request, metadata=self._metadata,
                                       timeout=self.config.timeout if timeout is None else timeout)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    def stream(self, method: str, request: Any,
               timeout: Optional[float] = None) -> Generator[Any, None, None]:
        """Iterate a server-streaming RPC by name; errors (also mid-stream)
        raise SandgateError. Closing the iterator early cancels the call."""
        call = self._calls[method](request, metadata=self._metadata, timeout=timeout)
        try:
            for event in call:
                yield event
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        finally:
            call.cancel()  # no-op once the call has finished

    def client_stream(self, method: str, requests: Any, timeout: Optional[float] = None) -> Any:
        """Call a client-streaming RPC by name with an iterator of requests;
        returns the reply or raises SandgateError."""
        try:
            return self._calls[method](requests, metadata=self._metadata, timeout=timeout)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False
