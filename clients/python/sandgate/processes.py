"""Background processes and PTYs (the blocking API): sb.commands.start(),
sb.commands.run(..., background=True), sb.pty.create(), and the Process
handle they return.

    p = sb.commands.start("python3 -m http.server 8000")
    p.send_stdin("hello\\n")
    for ev in p.attach():          # output from offset 0, then live, then the exit
        ...
    p.signal("TERM"); info = p.wait()

A Process names one process of one sandbox (its process_id, "p<N>"); it
holds no connection of its own, so any number may exist, and
sb.commands.connect(process_id) makes one for a process started elsewhere.
Output is kept by the host (the newest max_output_bytes per stream), so
attach() can start from any offset and several attachers may read at once;
bytes the host no longer holds arrive as a `dropped` event.
"""
from contextlib import closing
from typing import Any, Callable, Iterator, List, Optional, Union

from . import _requests as rq
from ._rpc import pb

Signal = Union[int, str]

# WaitProcess answers after at most this long; wait() asks again until done.
_WAIT_STEP = 60


class ProcessOutput:
    """What attach() collected when iterated to the end by output()."""

    def __init__(self) -> None:
        self.stdout = b""
        self.stderr = b""
        self.dropped = 0          # bytes the host no longer held
        self.exit: Any = None     # sandgate.v1.ExecExit

    @property
    def exit_code(self) -> Optional[int]:
        return None if self.exit is None else self.exit.exit_code


class Process:
    """One process in a sandbox. .process_id (also .pid) names it."""

    def __init__(self, sandbox: Any, process_id: str, pty: bool = False):
        self.sandbox = sandbox  # borrowed
        self.process_id = process_id
        self.pid = process_id
        self.pty = pty

    def _ref(self, cls: Any, **kw: Any) -> Any:
        sb = self.sandbox
        return rq.ref(cls, sb.sandbox_id, sb.user_id, process_id=self.process_id, **kw)

    def info(self, request_timeout: Optional[float] = None) -> Any:
        """sandgate.v1.ProcessInfo as of now: state, stdout_bytes, exit, ..."""
        for p in self.sandbox.commands.list(request_timeout=request_timeout):
            if p.process_id == self.process_id:
                return p
        raise LookupError("sandgate: process %s is no longer listed" % self.process_id)

    def send_stdin(self, data: Union[str, bytes], close: bool = False,
                   request_timeout: Optional[float] = None) -> int:
        """Write to its stdin (a PTY: typed input); close=True then ends the
        input (EOF; ^D on a PTY). Returns the bytes still waiting for the
        process to read them. A process that does not read gets at most
        1 MiB held for it: past that this raises QuotaExceeded."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        r = self.sandbox.client.unary("SendInput", self._ref(pb.SendInputRequest, data=data,
                                                              close_stdin=close),
                                      timeout=request_timeout)
        return int(r.pending_bytes)

    def close_stdin(self, request_timeout: Optional[float] = None) -> None:
        self.send_stdin(b"", close=True, request_timeout=request_timeout)

    def signal(self, sig: Signal = "TERM", request_timeout: Optional[float] = None) -> None:
        """A signal by number or name (TERM, KILL, INT, HUP, QUIT, USR1,
        USR2, STOP, CONT, WINCH) to its process group."""
        self.sandbox.client.unary("SignalProcess", self._ref(pb.SignalProcessRequest,
                                                             **rq.signal_fields(sig)),
                                  timeout=request_timeout)

    def kill(self, request_timeout: Optional[float] = None) -> None:
        self.signal("KILL", request_timeout=request_timeout)

    def resize(self, rows: int, cols: int, request_timeout: Optional[float] = None) -> None:
        """A PTY's window size (1..1000 each); the process gets SIGWINCH."""
        self.sandbox.client.unary("ResizePty", self._ref(pb.ResizePtyRequest, rows=int(rows),
                                                         cols=int(cols)),
                                  timeout=request_timeout)

    def wait(self, timeout: Optional[float] = None) -> Any:
        """Until it exits (timeout None) or timeout seconds pass: its
        ProcessInfo either way (.state, .exit.exit_code, .exit.signal)."""
        left = timeout
        while True:
            step = _WAIT_STEP if left is None else max(0, min(_WAIT_STEP, int(-(-left // 1))))
            info = self.sandbox.client.unary(
                "WaitProcess", self._ref(pb.WaitProcessRequest, timeout_seconds=step or 1),
                timeout=(step or 1) + 30)
            if info.state == pb.PROCESS_STATE_EXITED:
                return info
            if left is not None:
                left -= step
                if left <= 0:
                    return info

    def attach(self, stdout_offset: int = 0, stderr_offset: int = 0,
               request_timeout: Optional[float] = None) -> Iterator[Any]:
        """Iterate sandgate.v1.ProcessEvent: stdout/stderr (offset, data)
        from the given offsets, `dropped` for bytes no longer held, and the
        exit last. Close the iterator to detach (the process runs on)."""
        sb = self.sandbox
        return sb.client.stream("AttachProcess", self._ref(
            pb.AttachProcessRequest, stdout_offset=int(stdout_offset),
            stderr_offset=int(stderr_offset)), timeout=request_timeout)

    def output(self, on_stdout: Optional[Callable[[bytes], Any]] = None,
               on_stderr: Optional[Callable[[bytes], Any]] = None,
               request_timeout: Optional[float] = None) -> ProcessOutput:
        """Attach from the start and collect everything until it exits."""
        out = ProcessOutput()
        with closing(self.attach(request_timeout=request_timeout)) as evs:
            for ev in evs:
                kind = ev.WhichOneof("event")
                if kind == "stdout":
                    out.stdout += ev.stdout.data
                    if on_stdout:
                        on_stdout(ev.stdout.data)
                elif kind == "stderr":
                    out.stderr += ev.stderr.data
                    if on_stderr:
                        on_stderr(ev.stderr.data)
                elif kind == "dropped":
                    out.dropped += ev.dropped.bytes
                elif kind == "exit":
                    out.exit = ev.exit
        return out

    def __repr__(self) -> str:
        return "Process(%r, %s)" % (self.process_id, self.sandbox.sandbox_id)


def start(sandbox: Any, cmd: str, *, pty: bool = False, rows: int = 0, cols: int = 0,
          timeout: Optional[float] = None, max_output_bytes: Optional[int] = None,
          request_timeout: Optional[float] = None) -> Process:
    """Exec with background: the process id once it runs."""
    req = rq.process(sandbox.sandbox_id, sandbox.user_id, cmd, timeout, max_output_bytes, pty,
                     rows, cols)
    pid = ""
    with closing(sandbox.client.stream("Exec", req, timeout=request_timeout or 30)) as evs:
        for ev in evs:
            if ev.WhichOneof("event") == "started":
                pid = ev.started.process_id
    if not pid:
        raise RuntimeError("sandgate: Exec ended without a process id")
    return Process(sandbox, pid, pty)


def list_processes(sandbox: Any, request_timeout: Optional[float] = None) -> List[Any]:
    resp = sandbox.client.unary("ListProcesses", rq.ref(pb.ListProcessesRequest,
                                                        sandbox.sandbox_id, sandbox.user_id),
                                timeout=request_timeout)
    return list(resp.processes)


class Pty:
    """sb.pty: terminals. create() starts a shell (or cmd) on a PTY."""

    def __init__(self, sandbox: Any):
        self._sb = sandbox

    def create(self, rows: int = 24, cols: int = 80, cmd: str = "exec sh -i", *,
               timeout: Optional[float] = None, max_output_bytes: Optional[int] = None,
               request_timeout: Optional[float] = None) -> Process:
        return start(self._sb, cmd, pty=True, rows=rows, cols=cols, timeout=timeout,
                     max_output_bytes=max_output_bytes, request_timeout=request_timeout)
