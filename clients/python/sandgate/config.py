"""Connection settings: where the gateway is, the tenant's credentials and
TLS. Arguments win over the environment:

    SANDGATE_ADDR       host:port of the gateway (default 127.0.0.1:7443)
    SANDGATE_API_KEY    tenant API key, sent as `authorization: Bearer <key>`
    SANDGATE_USER       default end-user id for calls that need one
    SANDGATE_TLS        1 = TLS (implied by any of the three below)
    SANDGATE_CA_FILE    PEM roots to verify the gateway (default: system roots)
    SANDGATE_CERT_FILE, SANDGATE_KEY_FILE   client certificate and key (mTLS)
    SANDGATE_SERVER_NAME  name to verify in the gateway's certificate

A tenant that authenticates by mTLS needs no API key.
"""
import os
from dataclasses import dataclass, field
from typing import List, Optional, Tuple, Union

import grpc

_MB = 1024 * 1024
PathOrPem = Union[str, bytes, None]


def _pem(v: PathOrPem) -> Optional[bytes]:
    """PEM bytes as given, or the contents of the file a str names."""
    if v is None or isinstance(v, bytes):
        return v
    with open(v, "rb") as f:
        return f.read()


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


@dataclass
class ConnectionConfig:
    """How to reach the gateway. Every field left None is read from the
    environment by resolve()."""

    addr: Optional[str] = None
    api_key: Optional[str] = None
    user_id: Optional[str] = None
    tls: Optional[bool] = None
    root_certificates: PathOrPem = None   # PEM bytes, or a path
    client_cert: PathOrPem = None         # mTLS: PEM bytes, or a path
    client_key: PathOrPem = None
    server_name: Optional[str] = None     # override the name checked in the certificate
    timeout: float = 30.0                 # default deadline of unary calls, seconds
    options: List[Tuple[str, object]] = field(default_factory=list)  # extra channel options

    def resolve(self) -> "ConnectionConfig":
        env = os.environ.get
        c = ConnectionConfig(**self.__dict__)
        c.addr = c.addr or env("SANDGATE_ADDR") or "127.0.0.1:7443"
        c.api_key = c.api_key if c.api_key is not None else env("SANDGATE_API_KEY")
        c.user_id = c.user_id if c.user_id is not None else env("SANDGATE_USER")
        c.root_certificates = c.root_certificates or env("SANDGATE_CA_FILE") or None
        c.client_cert = c.client_cert or env("SANDGATE_CERT_FILE") or None
        c.client_key = c.client_key or env("SANDGATE_KEY_FILE") or None
        c.server_name = c.server_name or env("SANDGATE_SERVER_NAME") or None
        if c.tls is None:
            c.tls = bool(_env_flag("SANDGATE_TLS") or c.root_certificates or c.client_cert)
        if bool(c.client_cert) != bool(c.client_key):
            raise ValueError("sandgate: client_cert and client_key go together (mTLS)")
        if not c.tls and c.client_cert:
            raise ValueError("sandgate: a client certificate needs tls=True")
        if not c.api_key and not c.client_cert:
            raise ValueError("sandgate: no credentials: pass api_key= (or set SANDGATE_API_KEY), "
                             "or a client certificate for mTLS")
        return c

    def metadata(self) -> Tuple[Tuple[str, str], ...]:
        return (("authorization", "Bearer " + self.api_key),) if self.api_key else ()

    def channel_options(self) -> List[Tuple[str, object]]:
        opts: List[Tuple[str, object]] = [("grpc.max_receive_message_length", 64 * _MB),
                                          ("grpc.max_send_message_length", 64 * _MB)]
        if self.server_name:
            opts.append(("grpc.ssl_target_name_override", self.server_name))
        opts.extend(self.options)
        return opts

    def credentials(self) -> Optional[grpc.ChannelCredentials]:
        """Channel credentials for TLS, or None for a plaintext channel."""
        if not self.tls:
            return None
        return grpc.ssl_channel_credentials(root_certificates=_pem(self.root_certificates),
                                            private_key=_pem(self.client_key),
                                            certificate_chain=_pem(self.client_cert))
