"""The errors a data-parallel run raises (exported from dyn.parallel)."""


class WorkerError(RuntimeError):
    """A worker process raised (its traceback is in the message) or died."""


class WorkerStalledError(WorkerError):
    """A worker process made no progress for ``stall_timeout`` seconds: it finished no step, did
    not wait at a barrier and used no CPU time (it was stopped with SIGSTOP, say, or blocked).
    The run was stopped and the worker terminated.

    Attributes:
        rank: the worker's index (1..workers-1; worker 0 is the process that called train).
        pid: its process id.
        state: its state when found, from /proc/<pid>/stat: "stopped (T)", "sleeping (S)",
            "in uninterruptible sleep (D)", ...
        seconds: how long it had made no progress.
    """

    def __init__(self, message, rank=None, pid=None, state=None, seconds=None):
        super().__init__(message)
        self.rank, self.pid, self.state, self.seconds = rank, pid, state, seconds
