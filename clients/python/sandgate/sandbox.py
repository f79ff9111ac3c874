"""Sandbox, CodeContext, Commands, Files: the blocking agent-facing API.

    with Sandbox.create(template="code-interpreter", user_id="u1", task_id="t1") as sb:
        ex = sb.run_code("x = 21 * 2\\nx", timeout=30)
        print(ex.text, ex.logs.stdout)

A Sandbox is a handle on one remote sandbox (one per agent task is the right
default). Used in a `with`, it is killed in a `finally` rather than left to
its TTL. It owns its Client only when it made one itself (no client=). The
asyncio twin is aio.py; the requests both send are built in _requests.py.
"""
from contextlib import closing
from typing import Any, Callable, Iterable, List, Mapping, Optional, Union

from . import _requests as rq
from ._rpc import pb
from .client import Client
from .errors import SandboxNotFound, SandgateError
from . import processes as procs
from .execution import (CommandResult, ExecAccumulator, Execution, RunCodeAccumulator,
                        SandboxInfo, SandboxList)

OnText = Optional[Callable[[str], Any]]


def _run(pending: Any) -> None:
    for cb, arg in pending:
        cb(arg)


def _client(client: Optional[Client], conn: Mapping[str, Any]):
    """(client, owned): the caller's, or a new one from conn / the environment."""
    if client is not None:
        if conn:
            raise TypeError("sandgate: pass client= or connection settings (%s), not both"
                            % ", ".join(sorted(conn)))
        return client, False
    return Client(**conn), True


class CodeContext:
    """A persistent Python interpreter inside a sandbox: variables and
    imports survive from one run_code to the next, like a notebook. Every
    sandbox has a default one; create_code_context() makes more."""

    def __init__(self, sandbox: "Sandbox", context_id: str, language: str = "python",
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

    def run_code(self, code: str, **kw: Any) -> Execution:
        """sandbox.run_code(code, context=this, ...)."""
        return self.sandbox.run_code(code, context=self, **kw)

    def __repr__(self) -> str:
        return "CodeContext(%r, %s)" % (self.context_id, self.sandbox.sandbox_id)


class Commands:
    """sb.commands: shell commands in the sandbox."""

    def __init__(self, sandbox: "Sandbox"):
        self._sb = sandbox

    def run(self, cmd: str, timeout: Optional[float] = None, *, on_stdout: OnText = None,
            on_stderr: OnText = None, max_output_bytes: Optional[int] = None,
            request_timeout: Optional[float] = None, background: bool = False) -> Any:
        """Run `/bin/sh -c cmd` in the sandbox and wait for it. A non-zero
        exit is not an exception: look at .exit_code (and .timed_out,
        .truncated). timeout is the command's limit in seconds (None =
        policy default). background=True returns a Process at once
        instead (see start())."""
        sb = self._sb
        if background:
            return self.start(cmd, timeout=timeout, max_output_bytes=max_output_bytes,
                              request_timeout=request_timeout)
        req = rq.exec_(sb.sandbox_id, sb.user_id, cmd, timeout, max_output_bytes)
        acc = ExecAccumulator(on_stdout, on_stderr)
        with closing(sb.client.stream("Exec", req,
                                      timeout=rq.action_deadline(timeout, request_timeout))) as evs:
            for ev in evs:
                _run(acc.feed(ev))
        res, pending = acc.finish()
        _run(pending)
        return res

    def start(self, cmd: str, *, pty: bool = False, rows: int = 0, cols: int = 0,
              timeout: Optional[float] = None, max_output_bytes: Optional[int] = None,
              request_timeout: Optional[float] = None) -> "procs.Process":
        """Start `/bin/sh -c cmd` as a background process and return its
        Process handle as soon as it runs. timeout: seconds until it is
        killed (None = never; the sandbox's end kills it anyway);
        max_output_bytes: the newest output kept per stream (None = 1 MiB).
        pty=True runs it on a terminal of rows x cols."""
        return procs.start(self._sb, cmd, pty=pty, rows=rows, cols=cols, timeout=timeout,
                           max_output_bytes=max_output_bytes, request_timeout=request_timeout)

    def list(self, request_timeout: Optional[float] = None) -> List[Any]:
        """sandgate.v1.ProcessInfo of every process (running and recently exited)."""
        return procs.list_processes(self._sb, request_timeout=request_timeout)

    def connect(self, process_id: str) -> "procs.Process":
        """A handle on a process started earlier (by this client or another)."""
        return procs.Process(self._sb, process_id)

    def send_stdin(self, process_id: str, data: Union[str, bytes], **kw: Any) -> int:
        return self.connect(process_id).send_stdin(data, **kw)

    def kill(self, process_id: str, **kw: Any) -> None:
        self.connect(process_id).kill(**kw)


class Files:
    """sb.files: the sandbox's workspace (/workspace inside; paths are
    relative to it and may not lead out)."""

    def __init__(self, sandbox: "Sandbox"):
        self._sb = sandbox

    def read(self, path: str, format: str = "text",
             request_timeout: Optional[float] = None) -> Union[str, bytes]:
        """The file's contents: str (format="text", UTF-8) or bytes ("bytes")."""
        sb = self._sb
        resp = sb.client.unary("ReadFile", rq.ref(pb.ReadFileRequest, sb.sandbox_id,
                                                  sb.user_id, path=path),
                               timeout=request_timeout)
        return rq.decode_read(resp.data, format)

    def write(self, path: str, data: Union[str, bytes], mode: int = 0,
              request_timeout: Optional[float] = None) -> int:
        """Write bytes (or str, as UTF-8), creating parent folders; returns
        the number of bytes written. mode 0 = 0644."""
        sb = self._sb
        resp = sb.client.unary("WriteFile", rq.write(sb.sandbox_id, sb.user_id, path, data, mode),
                               timeout=request_timeout)
        return int(resp.bytes_written)

    # The calls below return the proto messages as they are (sandgate.v1
    # FileInfo, FileEvent, ...): sb.client.pb.FILE_TYPE_DIRECTORY etc.

    def list(self, path: str = "", recursive: bool = False, max_entries: int = 0,
             request_timeout: Optional[float] = None) -> Any:
        """ListFilesResponse: .entries (FileInfo: path, name, type, size,
        mode, mtime ms), sorted by path; .truncated when max_entries (0 =
        1000, at most 10000) cut it short."""
        sb = self._sb
        return sb.client.unary("ListFiles", rq.ref(pb.ListFilesRequest, sb.sandbox_id, sb.user_id,
                                                   path=path, recursive=recursive,
                                                   max_entries=max_entries),
                               timeout=request_timeout)

    def stat(self, path: str = "", request_timeout: Optional[float] = None) -> Any:
        """FileInfo of path ("" = the workspace). A FIFO, socket or device
        raises InvalidArgument; a missing path NotFound."""
        sb = self._sb
        return sb.client.unary("StatFile", rq.ref(pb.StatFileRequest, sb.sandbox_id, sb.user_id,
                                                  path=path), timeout=request_timeout)

    def exists(self, path: str) -> bool:
        from .errors import NotFound
        try:
            self.stat(path)
            return True
        except NotFound:
            return False

    def make_dir(self, path: str, parents: bool = False, mode: int = 0,
                 request_timeout: Optional[float] = None) -> Any:
        """mkdir (parents=True: mkdir -p, an existing directory is fine); FileInfo."""
        sb = self._sb
        return sb.client.unary("MakeDir", rq.ref(pb.MakeDirRequest, sb.sandbox_id, sb.user_id,
                                                 path=path, parents=parents, mode=mode),
                               timeout=request_timeout)

    def remove(self, path: str, recursive: bool = False,
               request_timeout: Optional[float] = None) -> int:
        """Remove a file, or a directory (with everything in it if
        recursive); returns the entries removed."""
        sb = self._sb
        resp = sb.client.unary("RemoveFile", rq.ref(pb.RemoveFileRequest, sb.sandbox_id,
                                                    sb.user_id, path=path, recursive=recursive),
                               timeout=request_timeout)
        return int(resp.removed)

    def rename(self, src: str, dst: str, overwrite: bool = False,
               request_timeout: Optional[float] = None) -> Any:
        """Rename within the workspace; FileInfo of dst. An existing dst is
        AlreadyExists unless overwrite; a file never replaces a directory nor
        a directory a file."""
        sb = self._sb
        return sb.client.unary("RenameFile", rq.ref(pb.RenameFileRequest, sb.sandbox_id,
                                                    sb.user_id, from_path=src, to_path=dst,
                                                    overwrite=overwrite),
                               timeout=request_timeout)

    def upload(self, path: str, data: Any, *, offset: int = 0, chunk_size: int = 1 << 20,
               mode: int = 0, size: Optional[int] = None,
               request_timeout: Optional[float] = None) -> Any:
        """Stream bytes, str or a binary file object to path in chunks (any
        size up to the workspace quota). offset > 0 resumes: the file keeps
        its first offset bytes and the data goes after them. size (default:
        len(data) when known) is checked against the quota up front.
        Returns UploadFileResponse (.size, .bytes_written)."""
        sb = self._sb
        if size is None:
            try:
                size = offset + len(data)
            except TypeError:
                size = 0
        return sb.client.client_stream(
            "UploadFile", rq.upload_requests(sb.sandbox_id, sb.user_id, path, data, offset,
                                             chunk_size, mode, size),
            timeout=request_timeout)

    def download_chunks(self, path: str, *, offset: int = 0, length: int = 0,
                        chunk_size: int = 0, request_timeout: Optional[float] = None) -> Any:
        """Iterate FileChunk messages (.offset, .data, .size, .last)."""
        sb = self._sb
        return sb.client.stream("DownloadFile", rq.ref(
            pb.DownloadFileRequest, sb.sandbox_id, sb.user_id, path=path, offset=offset,
            length=length, chunk_bytes=chunk_size), timeout=request_timeout)

    def download(self, path: str, *, offset: int = 0, length: int = 0, chunk_size: int = 0,
                 request_timeout: Optional[float] = None) -> bytes:
        """The file's bytes from offset (length 0 = to the end), streamed in chunks."""
        return b"".join(c.data for c in self.download_chunks(
            path, offset=offset, length=length, chunk_size=chunk_size,
            request_timeout=request_timeout))

    def watch(self, path: str = "", recursive: bool = False,
              request_timeout: Optional[float] = None) -> Any:
        """Iterate FileEvent messages under path: first FILE_EVENT_READY, then
        CREATE/MODIFY/DELETE/RENAME (and OVERFLOW when events were dropped),
        until the sandbox ends; close the iterator to stop watching."""
        sb = self._sb
        return sb.client.stream("WatchFiles", rq.ref(pb.WatchFilesRequest, sb.sandbox_id,
                                                     sb.user_id, path=path, recursive=recursive),
                                timeout=request_timeout)


class Sandbox:
    """One remote sandbox. Make one with Sandbox.create(...), attach to an
    existing one with Sandbox.connect(...).

    Attributes:
        sandbox_id: the id (also .id).
        user_id: the end user every call is made for.
        client: the Client it calls through.
        commands: Commands (sb.commands.run(...), .start(...) for a background process).
        pty: terminals (sb.pty.create(rows, cols) -> Process).
        files: Files (sb.files.read/write).
    """

    def __init__(self, client: Client, info: Any, user_id: str, owns_client: bool = False):
        self.client = client          # owned iff _owns_client
        self._info = info             # the last sandgate.v1.Sandbox message seen
        self.user_id = user_id
        self._owns_client = owns_client
        self._killed = False
        self.commands = Commands(self)
        self.files = Files(self)
        self.pty = procs.Pty(self)

    # -- lifecycle -------------------------------------------------------------

    @classmethod
    def create(cls, template: str = "code-interpreter", *, user_id: Optional[str] = None,
               task_id: str = "", ttl_seconds: Optional[float] = None,
               env: Optional[Mapping[str, str]] = None, egress: rq.Egress = (),
               secrets: Iterable[str] = (), user_token: str = "",
               metadata: Optional[Mapping[str, str]] = None, client: Optional[Client] = None,
               request_timeout: Optional[float] = None, **conn: Any) -> "Sandbox":
        """Create the sandbox of (user_id, task_id); creating again for the
        same task returns the same sandbox.

        Args:
            template: the sandbox template the policy allows.
            user_id: the end user (default: the client's, $SANDGATE_USER).
            task_id: the agent task this sandbox belongs to.
            ttl_seconds: lifetime (None = policy default; capped by policy).
            env: the sandbox's whole environment (plus granted secrets).
            egress: network the task needs: "host", (host, port) or
                {"host":, "port":}; denied unless the policy grants it.
            secrets: names of credentials the task needs.
            user_token: signed end-user token, where the tenant requires one.
            metadata: labels (key -> value), returned by get_info()/list()
                and matched by list(metadata=...).
            client: a shared Client; without it one is made from **conn
                (addr=, api_key=, tls=, ...; see ConnectionConfig) and the
                environment, and closed with the sandbox.

        Raises PolicyDenied (with .rule), QuotaExceeded, Unauthenticated,
        InvalidArgument, ... (see errors.py).
        """
        c, owns = _client(client, conn)
        try:
            u = rq.user(user_id, c.user_id)
            info = c.unary("CreateSandbox", rq.create(template, u, task_id, ttl_seconds, env,
                                                      egress, secrets, user_token, metadata),
                           timeout=request_timeout)
        except BaseException:
            if owns:
                c.close()
            raise
        return cls(c, info, u, owns)

    @classmethod
    def connect(cls, sandbox_id: str, *, user_id: Optional[str] = None,
                client: Optional[Client] = None, **conn: Any) -> "Sandbox":
        """Attach to an existing sandbox of this tenant and user. Raises
        SandboxNotFound if there is none (or it is another tenant's)."""
        c, owns = _client(client, conn)
        try:
            u = rq.user(user_id, c.user_id)
            info = c.unary("GetSandbox", rq.ref(pb.GetSandboxRequest, sandbox_id, u))
        except BaseException:
            if owns:
                c.close()
            raise
        return cls(c, info, u, owns)

    @staticmethod
    def list(*, user_id: Optional[str] = None, metadata: Optional[Mapping[str, str]] = None,
             page_size: int = 0, page_token: str = "", client: Optional[Client] = None,
             request_timeout: Optional[float] = None, **conn: Any) -> SandboxList:
        """One page of the caller's own sandboxes for this user, as
        SandboxInfo, in sandbox_id order: only those carrying every label in
        metadata; page_size 0 = 100 (at most 1000). SandboxList.next_page_token
        is the page_token of the next page ("" = last); see
        SandboxList.unreachable_hosts for an answer that may be partial.
        list_all() walks every page."""
        c, owns = _client(client, conn)
        try:
            req = pb.ListSandboxesRequest(user_id=rq.user(user_id, c.user_id),
                                          page_size=page_size, page_token=page_token)
            req.metadata.update(dict(metadata or {}))
            resp = c.unary("ListSandboxes", req, timeout=request_timeout)
        finally:
            if owns:
                c.close()
        boxes, unreachable = rq.list_answer(resp)
        return SandboxList([SandboxInfo.from_pb(m) for m in boxes], unreachable,
                           resp.next_page_token)

    @staticmethod
    def list_all(*, page_size: int = 0, **kw: Any) -> SandboxList:
        """Every page of list(**kw) joined (unreachable_hosts of them all)."""
        out = SandboxList()
        token = ""
        while True:
            page = Sandbox.list(page_size=page_size, page_token=token, **kw)
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
        """What the gateway last said about this sandbox (get_info() asks again)."""
        return SandboxInfo.from_pb(self._info)

    def get_info(self, request_timeout: Optional[float] = None) -> SandboxInfo:
        """Ask the gateway again (raises SandboxNotFound once it is gone)."""
        self._info = self.client.unary(
            "GetSandbox", rq.ref(pb.GetSandboxRequest, self.sandbox_id, self.user_id),
            timeout=request_timeout)
        return self.info

    refresh = get_info

    def is_running(self) -> bool:
        """True while the sandbox exists and runs."""
        try:
            return self.get_info().state == "running"
        except SandboxNotFound:
            return False

    def set_timeout(self, seconds: float, request_timeout: Optional[float] = None) -> SandboxInfo:
        """New lifetime: `seconds` from now (capped by policy)."""
        self._info = self.client.unary("ExtendSandbox",
                                       rq.extend(self.sandbox_id, self.user_id, seconds),
                                       timeout=request_timeout)
        return self.info

    extend = set_timeout

    def kill(self, request_timeout: Optional[float] = None) -> bool:
        """Kill the sandbox and everything in it. True if this call killed
        it, False if it was already gone (killed, expired). A client this
        sandbox made itself is closed afterwards."""
        try:
            self.client.unary("KillSandbox",
                              rq.ref(pb.KillSandboxRequest, self.sandbox_id, self.user_id),
                              timeout=request_timeout)
            return True
        except SandboxNotFound:
            return False
        finally:
            self._killed = True
            self.close()

    def close(self) -> None:
        """Release the connection this sandbox made itself (without killing
        the sandbox; connect() to it again later)."""
        if self._owns_client:
            self._owns_client = False
            self.client.close()

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if self._killed:
            return False
        try:
            self.kill()
        except SandgateError:
            if exc_type is None:
                raise  # otherwise keep the exception already unwinding
        return False

    def __repr__(self) -> str:
        return "Sandbox(%r, user=%r, task=%r)" % (self.sandbox_id, self.user_id,
                                                   self._info.task_id)

    # -- code ------------------------------------------------------------------

    def create_code_context(self, language: str = "python",
                            request_timeout: Optional[float] = None) -> CodeContext:
        """A new persistent interpreter, separate from the default one."""
        ctx = self.client.unary(
            "CreateContext", rq.ref(pb.CreateContextRequest, self.sandbox_id, self.user_id,
                                    language=language), timeout=request_timeout)
        return CodeContext(self, ctx.context_id, ctx.language or language)

    def list_code_contexts(self, request_timeout: Optional[float] = None) -> List[CodeContext]:
        """The sandbox's contexts: "default" first, then the created ones."""
        r = self.client.unary(
            "ListContexts", rq.ref(pb.ListContextsRequest, self.sandbox_id, self.user_id),
            timeout=request_timeout)
        return [CodeContext(self, c.context_id, **rq.ctx_fields(c)) for c in r.contexts]

    def restart_code_context(self, context: Union[CodeContext, str, None] = None,
                             request_timeout: Optional[float] = None) -> CodeContext:
        """Kill the context's interpreter and start a fresh one under the same
        id (None = the default context); returns once it is ready. A run in
        progress ends with error ContextRestarted."""
        ctx = getattr(context, "context_id", context) or ""
        c = self.client.unary(
            "RestartContext", rq.ref(pb.RestartContextRequest, self.sandbox_id, self.user_id,
                                     context_id=ctx), timeout=request_timeout)
        return CodeContext(self, c.context_id, c.language or "python")

    def remove_code_context(self, context: Union[CodeContext, str],
                            request_timeout: Optional[float] = None) -> None:
        """Delete a created context (the default one cannot be: NOT_FOUND for
        an unknown id, FAILED_PRECONDITION for "default"). A run in progress
        on it ends CANCELLED."""
        ctx = getattr(context, "context_id", context) or ""
        self.client.unary(
            "DeleteContext", rq.ref(pb.DeleteContextRequest, self.sandbox_id, self.user_id,
                                    context_id=ctx), timeout=request_timeout)

    def run_code(self, code: str, *, context: Union[CodeContext, str, None] = None,
                 timeout: Optional[float] = None, on_stdout: OnText = None,
                 on_stderr: OnText = None, on_result: Optional[Callable[[Any], Any]] = None,
                 on_error: Optional[Callable[[Any], Any]] = None,
                 max_output_bytes: Optional[int] = None, request_timeout: Optional[float] = None,
                 timeout_seconds: Optional[float] = None) -> Execution:
        """Run Python in a context (None = the sandbox's default one) and
        return its Execution.

        An exception in the code is not raised here: it is .error, and the
        context survives it. Callbacks get output as it streams: on_stdout /
        on_stderr get str, on_result each Result, on_error the ExecutionError;
        a callback that raises cancels the run (the code is interrupted) and
        the exception propagates.
        timeout (seconds; None = policy default) is enforced by the server,
        which interrupts the code (.timed_out; .context_restarted if it had
        to restart the interpreter). max_output_bytes lowers the policy's
        output cap (.truncated says output was cut). request_timeout is the
        client-side deadline (default: timeout plus a minute).
        """
        if timeout is None:
            timeout = timeout_seconds
        req = rq.run_code(self.sandbox_id, self.user_id, code, context, timeout, max_output_bytes)
        acc = RunCodeAccumulator(on_stdout, on_stderr, on_result, on_error)
        # A callback that raises ends the call: closing the stream cancels
        # it, and the cancel interrupts the code in the sandbox.
        with closing(self.client.stream("RunCode", req, timeout=rq.action_deadline(
                timeout, request_timeout))) as evs:
            for ev in evs:
                _run(acc.feed(ev))
        _run(acc.finish())
        return acc.ex

    # -- 0.1 names ---------------------------------------------------------------

    def exec(self, cmd: str, timeout_seconds: Optional[float] = None, **kw: Any) -> CommandResult:
        """Same as commands.run(cmd, timeout=timeout_seconds)."""
        return self.commands.run(cmd, timeout_seconds, **kw)

    def write_file(self, path: str, data: Union[str, bytes], mode: int = 0) -> int:
        return self.files.write(path, data, mode)

    def read_file(self, path: str) -> bytes:
        return self.files.read(path, format="bytes")  # type: ignore
