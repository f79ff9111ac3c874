"""Client: one gRPC channel to a sandgate gateway and the tenant's API key.
It owns the channel and turns every failed call into a SandgateError; the
sandbox-level API (Sandbox, CodeContext) lives in sandbox.py.

A Client is thread-safe and meant to be shared by all the sandboxes of one
agent service. Defaults come from $SANDGATE_ADDR and $SANDGATE_API_KEY.
"""
import os

import grpc

from . import _stubs
from .errors import from_rpc_error

_MB = 1024 * 1024


class Client:
    """Connection to the gateway.

    addr          "host:port" (default $SANDGATE_ADDR, else 127.0.0.1:7443)
    api_key       tenant API key, sent as `authorization: Bearer <key>`
                  (default $SANDGATE_API_KEY)
    secure        use TLS (root_certificates: PEM bytes, None = system roots)
    timeout       default deadline in seconds for unary calls
    """

    def __init__(self, addr=None, api_key=None, *, secure=False, root_certificates=None,
                 timeout=30.0, options=None):
        self.addr = addr or os.environ.get("SANDGATE_ADDR") or "127.0.0.1:7443"
        key = api_key if api_key is not None else os.environ.get("SANDGATE_API_KEY")
        if not key:
            raise ValueError("sandgate.Client: no api_key (pass one or set SANDGATE_API_KEY)")
        self._metadata = (("authorization", "Bearer " + key),)
        self.timeout = timeout
        opts = [("grpc.max_receive_message_length", 64 * _MB),
                ("grpc.max_send_message_length", 64 * _MB)]
        opts.extend(options or ())
        if secure:
            creds = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            self._channel = grpc.secure_channel(self.addr, creds, options=opts)
        else:
            self._channel = grpc.insecure_channel(self.addr, options=opts)
        self._stub = _stubs.grpc_pb().SandboxesStub(self._channel)
        self.pb = _stubs.pb()

    def __repr__(self):
        return "Client(%r)" % self.addr

    # -- calls: each returns the reply message or raises SandgateError --------

    def unary(self, method, request, timeout=None):
        """Call a unary RPC by name, e.g. unary("GetSandbox", req)."""
        fn = getattr(self._stub, method)
        try:
            return fn(request, metadata=self._metadata,
                      timeout=self.timeout if timeout is None else timeout)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    def stream(self, method, request, timeout=None):
        """Iterate a server-streaming RPC by name; errors (also mid-stream)
        raise SandgateError. Abandoning the iterator cancels the call."""
        fn = getattr(self._stub, method)
        call = fn(request, metadata=self._metadata, timeout=timeout)
        try:
            for event in call:
                yield event
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        finally:
            call.cancel()  # no-op once the call has finished

    # -- lifetime --------------------------------------------------------------

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
