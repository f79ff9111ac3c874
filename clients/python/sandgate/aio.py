"""The asyncio twin of client.py and sandbox.py, on grpc.aio: AsyncClient,
AsyncSandbox (with .commands and .files), AsyncCodeContext. Same arguments,
same results, same exceptions; every call is a coroutine.

    async with AsyncSandbox.create(user_id="u1", task_id="t1") as sb:
        ex = await sb.run_code("1 + 1")

(`sb = await AsyncSandbox.create(...)` works too.) Callbacks may be plain
functions or coroutine functions. One AsyncClient belongs to one event loop.
"""
import inspect
from typing import Any, AsyncGenerator, Awaitable, Callable, Generator, Iterable, List, Mapping, Optional, Union

import grpc
import grpc.aio

from . import _requests as rq
from . import _rpc
from ._rpc import pb
from .config import ConnectionConfig
from .errors import SandboxNotFound, SandgateError, from_rpc_error
from .execution import (CommandResult, ExecAccumulator, Execution, RunCodeAccumulator,
                        SandboxInfo, SandboxList)

Cb = Optional[Callable[[Any], Any]]


async def _run(pending: Any) -> None:
    for cb, arg in pending:
        r = cb(arg)
        if inspect.isawaitable(r):
            await r


class AsyncClient:
    """Connection to the gateway for asyncio code; arguments as Client's."""

    def __init__(self, addr: Optional[str] = None, api_key: Optional[str] = None, *,
                 config: Optional[ConnectionConfig] = None, **kw: Any):
        if config is None:
            config = ConnectionConfig(addr=addr, api_key=api_key, **kw)
        elif addr or api_key or kw:
            raise TypeError("sandgate.AsyncClient: pass config= or keyword settings, not both")
        self.config = config.resolve()
        self.addr: str = self.config.addr or ""
        self.pb = pb
        self._metadata = self.config.metadata()
        creds = self.config.credentials()
        opts = self.config.channel_options()
        if creds is None:
            self._channel = grpc.aio.insecure_channel(self.addr, options=opts)
        else:
            self._channel = grpc.aio.secure_channel(self.addr, creds, options=opts)
        self._calls = _rpc.bind(self._channel)

    @property
    def user_id(self) -> Optional[str]:
        return self.config.user_id

    async def unary(self, method: str, request: Any, timeout: Optional[float] = None) -> Any:
        try:
            return await self._calls[method](
                request, metadata=self._metadata,
                timeout=self.config.timeout if timeout is None else timeout)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    async def stream(self, method: str, request: Any,
                     timeout: Optional[float] = None) -> AsyncGenerator[Any, None]:
        call = self._calls[method](request, metadata=self._metadata, timeout=timeout)
        try:
            async for event in call:
                yield event
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        finally:
            call.cancel()

    async def client_stream(self, method: str, requests: Any,
                            timeout: Optional[float] = None) -> Any:
        """A client-streaming RPC by name with an (async) iterator of
        requests; the reply, or raises SandgateError."""
        try:
            return await self._calls[method](requests, metadata=self._metadata, timeout=timeout)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> bool:
        await self.close()
        return False


def _client(client: Optional[AsyncClient], conn: Mapping[str, Any]):
    if client is not None:
        if conn:
            raise TypeError("sandgate: pass client= or connection settings (%s), not both"
                            % ", ".join(sorted(conn)))
        return client, False
    return AsyncClient(**conn), True


class AsyncCodeContext:
    """A persistent interpreter in an AsyncSandbox (see CodeContext)."""

    def __init__(self, sandbox: "AsyncSandbox", context_id: str, language: str = "python",
                 state: str = "", created_at: int = 0, restarts: int = 0):
        self.sandbox = sandbox  # borrowed
        self.context_id = context_id
        self.id = context_id
        self.language = language
        # as of list_code_contexts(): "starting", "idle", "running",
        # "restarting"; created_at in Unix ms; times its state was lost
        self.state = state
        self.created_at = created_at
        self.restarts = restarts

    async def run_code(self, code: str, **kw: Any) -> Execution:
        return await self.sandbox.run_code(code, context=self, **kw)


class AsyncCommands:
    def __init__(self, sandbox: "AsyncSandbox"):
        self._sb = sandbox

    async def run(self, cmd: str, timeout: Optional[float] = None, *, on_stdout: Cb = None,
                  on_stderr: Cb = None, max_output_bytes: Optional[int] = None,
                  request_timeout: Optional[float] = None) -> CommandResult:
        """See Commands.run."""
        sb = self._sb
        req = rq.exec_(sb.sandbox_id, sb.user_id, cmd, timeout, max_output_bytes)
        acc = ExecAccumulator(on_stdout, on_stderr)
        evs = sb.client.stream("Exec", req, timeout=rq.action_deadline(timeout, request_timeout))
        try:
            async for ev in evs:
                await _run(acc.feed(ev))
        finally:
            await evs.aclose()
        res, pending = acc.finish()
        await _run(pending)
        return res


class AsyncFiles:
    def __init__(self, sandbox: "AsyncSandbox"):
        self._sb = sandbox

    async def read(self, path: str, format: str = "text",
                   request_timeout: Optional[float] = None) -> Union[str, bytes]:
        """See Files.read."""
        sb = self._sb
        resp = await sb.client.unary("ReadFile", rq.ref(pb.ReadFileRequest, sb.sandbox_id,
                                                        sb.user_id, path=path),
                                     timeout=request_timeout)
        return rq.decode_read(resp.data, format)

    async def write(self, path: str, data: Union[str, bytes], mode: int = 0,
                    request_timeout: Optional[float] = None) -> int:
        """See Files.write."""
        sb = self._sb
        resp = await sb.client.unary("WriteFile",
                                     rq.write(sb.sandbox_id, sb.user_id, path, data, mode),
                                     timeout=request_timeout)
        return int(resp.bytes_written)

    # As Files: the proto messages as they are (FileInfo, FileEvent, ...).

    async def list(self, path: str = "", recursive: bool = False, max_entries: int = 0,
                   request_timeout: Optional[float] = None) -> Any:
        """See Files.list."""
        sb = self._sb
        return await sb.client.unary("ListFiles", rq.ref(
            pb.ListFilesRequest, sb.sandbox_id, sb.user_id, path=path, recursive=recursive,
            max_entries=max_entries), timeout=request_timeout)

    async def stat(self, path: str = "", request_timeout: Optional[float] = None) -> Any:
        """See Files.stat."""
        sb = self._sb
        return await sb.client.unary("StatFile", rq.ref(pb.StatFileRequest, sb.sandbox_id,
                                                        sb.user_id, path=path),
                                     timeout=request_timeout)

    async def exists(self, path: str) -> bool:
        """See Files.exists."""
        from .errors import NotFound
        try:
            await self.stat(path)
            return True
        except NotFound:
            return False

    async def make_dir(self, path: str, parents: bool = False, mode: int = 0,
                       request_timeout: Optional[float] = None) -> Any:
        """See Files.make_dir."""
        sb = self._sb
        return await sb.client.unary("MakeDir", rq.ref(
            pb.MakeDirRequest, sb.sandbox_id, sb.user_id, path=path, parents=parents, mode=mode),
            timeout=request_timeout)

    async def remove(self, path: str, recursive: bool = False,
                     request_timeout: Optional[float] = None) -> int:
        """See Files.remove."""
        sb = self._sb
        resp = await sb.client.unary("RemoveFile", rq.ref(
            pb.RemoveFileRequest, sb.sandbox_id, sb.user_id, path=path, recursive=recursive),
            timeout=request_timeout)
        return int(resp.removed)

    async def rename(self, src: str, dst: str, overwrite: bool = False,
                     request_timeout: Optional[float] = None) -> Any:
        """See Files.rename."""
        sb = self._sb
        return await sb.client.unary("RenameFile", rq.ref(
            pb.RenameFileRequest, sb.sandbox_id, sb.user_id, from_path=src, to_path=dst,
            overwrite=overwrite), timeout=request_timeout)

    async def upload(self, path: str, data: Any, *, offset: int = 0, chunk_size: int = 1 << 20,
                     mode: int = 0, size: Optional[int] = None,
                     request_timeout: Optional[float] = None) -> Any:
        """See Files.upload (bytes, str or a binary file object; read in
        chunks as they are sent)."""
        sb = self._sb
        if size is None:
            try:
                size = offset + len(data)
            except TypeError:
                size = 0
        return await sb.client.client_stream(
            "UploadFile", rq.upload_requests(sb.sandbox_id, sb.user_id, path, data, offset,
                                             chunk_size, mode, size),
            timeout=request_timeout)

    def download_chunks(self, path: str, *, offset: int = 0, length: int = 0,
                        chunk_size: int = 0,
                        request_timeout: Optional[float] = None) -> AsyncGenerator[Any, None]:
        """See Files.download_chunks: an async iterator of FileChunk."""
        sb = self._sb
        return sb.client.stream("DownloadFile", rq.ref(
            pb.DownloadFileRequest, sb.sandbox_id, sb.user_id, path=path, offset=offset,
            length=length, chunk_bytes=chunk_size), timeout=request_timeout)

    async def download(self, path: str, *, offset: int = 0, length: int = 0, chunk_size: int = 0,
                       request_timeout: Optional[float] = None) -> bytes:
        """See Files.download."""
        out = []
        async for c in self.download_chunks(path, offset=offset, length=length,
                                            chunk_size=chunk_size,
                                            request_timeout=request_timeout):
            out.append(c.data)
        return b"".join(out)

    def watch(self, path: str = "", recursive: bool = False,
              request_timeout: Optional[float] = None) -> AsyncGenerator[Any, None]:
        """See Files.watch: an async iterator of FileEvent; aclose() it (or
        leave the async for) to stop watching."""
        sb = self._sb
        return sb.client.stream("WatchFiles", rq.ref(pb.WatchFilesRequest, sb.sandbox_id,
                                                     sb.user_id, path=path, recursive=recursive),
                                timeout=request_timeout)


class _Opening:
    """What AsyncSandbox.create/connect return: await it for the sandbox, or
    use it directly in `async with` (the sandbox is killed on exit)."""

    def __init__(self, coro: Awaitable["AsyncSandbox"]):
        self._coro = coro
        self._sb: Optional[AsyncSandbox] = None

    def __await__(self) -> Generator[Any, None, "AsyncSandbox"]:
        return self._coro.__await__()

    async def __aenter__(self) -> "AsyncSandbox":
        self._sb = await self._coro
        return self._sb

    async def __aexit__(self, *exc: Any) -> bool:
        assert self._sb is not None
        return await self._sb.__aexit__(*exc)


class AsyncSandbox:
    """One remote sandbox, for asyncio code (see Sandbox)."""

    def __init__(self, client: AsyncClient, info: Any, user_id: str, owns_client: bool = False):
        self.client = client      # owned iff _owns_client
        self._info = info
        self.user_id = user_id
        self._owns_client = owns_client
        self._killed = False
        self.commands = AsyncCommands(self)
        self.files = AsyncFiles(self)

    @classmethod
    def create(cls, template: str = "code-interpreter", *, user_id: Optional[str] = None,
               task_id: str = "", ttl_seconds: Optional[float] = None,
               env: Optional[Mapping[str, str]] = None, egress: rq.Egress = (),
               secrets: Iterable[str] = (), user_token: str = "",
               metadata: Optional[Mapping[str, str]] = None,
               client: Optional[AsyncClient] = None, request_timeout: Optional[float] = None,
               **conn: Any) -> _Opening:
        """See Sandbox.create."""
        async def go() -> "AsyncSandbox":
            c, owns = _client(client, conn)
            try:
                u = rq.user(user_id, c.user_id)
                info = await c.unary("CreateSandbox",
                                     rq.create(template, u, task_id, ttl_seconds, env, egress,
                                               secrets, user_token, metadata),
                                     timeout=request_timeout)
            except BaseException:
                if owns:
                    await c.close()
                raise
            return cls(c, info, u, owns)
        return _Opening(go())

    @classmethod
    def connect(cls, sandbox_id: str, *, user_id: Optional[str] = None,
                client: Optional[AsyncClient] = None, **conn: Any) -> _Opening:
        """See Sandbox.connect."""
        async def go() -> "AsyncSandbox":
            c, owns = _client(client, conn)
            try:
                u = rq.user(user_id, c.user_id)
                info = await c.unary("GetSandbox", rq.ref(pb.GetSandboxRequest, sandbox_id, u))
            except BaseException:
                if owns:
                    await c.close()
                raise
            return cls(c, info, u, owns)
        return _Opening(go())

    @staticmethod
    async def list(*, user_id: Optional[str] = None, metadata: Optional[Mapping[str, str]] = None,
                   page_size: int = 0, page_token: str = "", client: Optional[AsyncClient] = None,
                   request_timeout: Optional[float] = None, **conn: Any) -> SandboxList:
        """See Sandbox.list: one page, filtered by labels (metadata)."""
        c, owns = _client(client, conn)
        try:
            req = pb.ListSandboxesRequest(user_id=rq.user(user_id, c.user_id),
                                          page_size=page_size, page_token=page_token)
            req.metadata.update(dict(metadata or {}))
            resp = await c.unary("ListSandboxes", req, timeout=request_timeout)
        finally:
            if owns:
                await c.close()
        boxes, unreachable = rq.list_answer(resp)
        return SandboxList([SandboxInfo.from_pb(m) for m in boxes], unreachable,
                           resp.next_page_token)

    @staticmethod
    async def list_all(*, page_size: int = 0, **kw: Any) -> SandboxList:
        """See Sandbox.list_all: every page of list(**kw) joined."""
        out = SandboxList()
        token = ""
        while True:
            page = await AsyncSandbox.list(page_size=page_size, page_token=token, **kw)
            out.extend(page)
            out.unreachable_hosts = sorted(set(out.unreachable_hosts) | set(page.unreachable_hosts))
            token = page.next_page_token
            if not token:
                return out

    @property
    def sandbox_id(self) -> str:
        return self._info.sandbox_id

    @property
    def id(self) -> str:
        return self._info.sandbox_id

    @property
    def info(self) -> SandboxInfo:
        return SandboxInfo.from_pb(self._info)

    async def get_info(self, request_timeout: Optional[float] = None) -> SandboxInfo:
        self._info = await self.client.unary(
            "GetSandbox", rq.ref(pb.GetSandboxRequest, self.sandbox_id, self.user_id),
            timeout=request_timeout)
        return self.info

    async def is_running(self) -> bool:
        try:
            return (await self.get_info()).state == "running"
        except SandboxNotFound:
            return False

    async def set_timeout(self, seconds: float,
                          request_timeout: Optional[float] = None) -> SandboxInfo:
        self._info = await self.client.unary("ExtendSandbox",
                                             rq.extend(self.sandbox_id, self.user_id, seconds),
                                             timeout=request_timeout)
        return self.info

    async def kill(self, request_timeout: Optional[float] = None) -> bool:
        """See Sandbox.kill."""
        try:
            await self.client.unary("KillSandbox",
                                    rq.ref(pb.KillSandboxRequest, self.sandbox_id, self.user_id),
                                    timeout=request_timeout)
            return True
        except SandboxNotFound:
            return False
        finally:
            self._killed = True
            await self.close()

    async def close(self) -> None:
        if self._owns_client:
            self._owns_client = False
            await self.client.close()

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if self._killed:
            return False
        try:
            await self.kill()
        except SandgateError:
            if exc_type is None:
                raise
        return False

    async def create_code_context(self, language: str = "python",
                                  request_timeout: Optional[float] = None) -> AsyncCodeContext:
        ctx = await self.client.unary(
            "CreateContext", rq.ref(pb.CreateContextRequest, self.sandbox_id, self.user_id,
                                    language=language), timeout=request_timeout)
        return AsyncCodeContext(self, ctx.context_id, ctx.language or language)

    async def list_code_contexts(self, request_timeout: Optional[float] = None) -> List[AsyncCodeContext]:
        """The sandbox's contexts: "default" first, then the created ones."""
        r = await self.client.unary(
            "ListContexts", rq.ref(pb.ListContextsRequest, self.sandbox_id, self.user_id),
            timeout=request_timeout)
        return [AsyncCodeContext(self, c.context_id, **rq.ctx_fields(c)) for c in r.contexts]

    async def restart_code_context(self, context: Union[AsyncCodeContext, str, None] = None,
                             request_timeout: Optional[float] = None) -> AsyncCodeContext:
        """Kill the context's interpreter and start a fresh one under the same
        id (None = the default context); returns once it is ready. A run in
        progress ends with error ContextRestarted."""
        ctx = getattr(context, "context_id", context) or ""
        c = await self.client.unary(
            "RestartContext", rq.ref(pb.RestartContextRequest, self.sandbox_id, self.user_id,
                                     context_id=ctx), timeout=request_timeout)
        return AsyncCodeContext(self, c.context_id, c.language or "python")

    async def remove_code_context(self, context: Union[AsyncCodeContext, str],
                            request_timeout: Optional[float] = None) -> None:
        """Delete a created context (the default one cannot be: NOT_FOUND for
        an unknown id, FAILED_PRECONDITION for "default"). A run in progress
        on it ends CANCELLED."""
        ctx = getattr(context, "context_id", context) or ""
        await self.client.unary(
            "DeleteContext", rq.ref(pb.DeleteContextRequest, self.sandbox_id, self.user_id,
                                    context_id=ctx), timeout=request_timeout)

    async def run_code(self, code: str, *, context: Union[AsyncCodeContext, str, None] = None,
                       timeout: Optional[float] = None, on_stdout: Cb = None,
                       on_stderr: Cb = None, on_result: Cb = None, on_error: Cb = None,
                       max_output_bytes: Optional[int] = None,
                       request_timeout: Optional[float] = None) -> Execution:
        """See Sandbox.run_code."""
        req = rq.run_code(self.sandbox_id, self.user_id, code, context, timeout, max_output_bytes)
        acc = RunCodeAccumulator(on_stdout, on_stderr, on_result, on_error)
        evs = self.client.stream("RunCode", req,
                                 timeout=rq.action_deadline(timeout, request_timeout))
        try:
            async for ev in evs:
                await _run(acc.feed(ev))
        finally:
            await evs.aclose()  # cancels the call if a callback raised
        await _run(acc.finish())
        return acc.ex
