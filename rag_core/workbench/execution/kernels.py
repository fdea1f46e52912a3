"""Warm Jupyter kernels: papermill executes notebook after notebook in one kernel that stays alive.

Starting a kernel, importing torch, chromadb and mlflow, loading the models and compiling ranx's numba
code costs seconds; a sweep point's own work is often less. ``WarmKernel`` keeps one kernel per sweep
worker and hands it to papermill (through the ``rag-warm`` engine: papermill's nbclient engine, given
an existing kernel manager, which it then leaves running), so those costs are paid once per worker.

A kernel imports what every point imports (``rag_core.workbench.execution.evaluation.preload``) as it starts,
before it reports ready; ``WarmKernel.start`` starts it ahead of the first notebook, so that with one
worker this overlaps the sweep's own set-up (MLflow, the inputs, the parent run, the index builds).
One kernel client (its ZeroMQ channels) also serves every notebook: a new client waits 0.2 s for the
kernel's output channel to go quiet before it reports ready, a third of a warm point's overhead.

Points stay independent: the evaluation notebook's parameters cell sets every setting and input, and
what a kernel keeps between points (loaded models, compiled code, retrieval candidates keyed by their
settings) changes no result. A kernel that dies is replaced before the next notebook.
Left out: kernels on other machines (the Ray executor's job) and languages other than Python.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Mapping

from nbclient.exceptions import DeadKernelError
from nbclient.util import ensure_async, run_hook
from papermill.clientwrap import PapermillNotebookClient
from papermill.engines import NBClientEngine, papermill_engines

ENGINE_NAME = "rag-warm"
KERNEL_NAME = "python3"
WARM_UP = "from rag_core.workbench.execution.evaluation import preload; preload()"  # IPython's exec_lines: run at start
# log level: the local kernel's "running over TCP without encryption" warning, once per kernel
KERNEL_ARGUMENTS = ["--IPKernelApp.log_level=ERROR", f"--IPKernelApp.exec_lines={WARM_UP}"]
HISTORY = "--HistoryManager.hist_file=:memory:"  # what nbclient adds when it starts a kernel itself
STOPPED = "rag_stopped_on_purpose"  # set on a kernel manager that WarmKernel.shutdown is ending
log = logging.getLogger("papermill")


class WarmClient(PapermillNotebookClient):
    """papermill's client without the SIGINT/SIGTERM handlers nbclient installs while a notebook runs:
    they turn Ctrl-C into a clean-up of the kernel instead of a KeyboardInterrupt, so a sweep could go on
    after it. Without them Ctrl-C stops the sweep, which marks the point and itself KILLED. The kernel
    belongs to ``WarmKernel``, which shuts it down."""

    async def _async_check_alive(self) -> None:
        """nbclient's check, without its "Kernel died while waiting for execute reply." error when the kernel
        was shut down on purpose (``WarmKernel.shutdown``: after Ctrl-C, a notebook still running in another
        thread would print it before the sweep says "interrupted"). The DeadKernelError is raised either way."""
        if getattr(self.km, STOPPED, False) and not await ensure_async(self.kc.is_alive()):
            raise DeadKernelError("Kernel died")
        await super()._async_check_alive()

    @asynccontextmanager
    async def async_setup_kernel(self, **kwargs: Any) -> AsyncIterator[None]:
        if not self.km.has_kernel:
            await self.async_start_new_kernel(**kwargs)
        if self.kc is None:
            await self.async_start_new_kernel_client()
        try:
            yield
        except RuntimeError:
            await run_hook(self.on_notebook_error, notebook=self.nb)
            raise
        finally:
            await run_hook(self.on_notebook_complete, notebook=self.nb)


class WarmKernelEngine(NBClientEngine):
    """nbclient's engine, executing in the kernel manager ``km`` it is given and leaving it running."""

    @classmethod
    def execute_managed_notebook(cls, nb_man, kernel_name, km=None, start_timeout=60, execution_timeout=None,
                                 log_output=False, stdout_file=None, stderr_file=None, kernel_cwd=None, *,
                                 warm: "WarmKernel", **kwargs):
        """`warm`: the ``WarmKernel`` whose manager `km` is; it keeps the client between notebooks."""
        client = WarmClient(
            nb_man, km=km, kernel_name=kernel_name, timeout=execution_timeout, startup_timeout=start_timeout,
            resources={"metadata": {"path": kernel_cwd}},  # where nbclient starts the kernel
            log=log, log_output=log_output, stdout_file=stdout_file, stderr_file=stderr_file,
            extra_arguments=KERNEL_ARGUMENTS,
        )
        client.kc = warm.client  # None the first time: nbclient makes one, which the kernel keeps
        try:
            return client.execute()
        finally:
            warm.client = client.kc


papermill_engines.register(ENGINE_NAME, WarmKernelEngine)


class WarmKernel:
    """One Jupyter kernel that executes notebooks one after another; started on first use."""

    def __init__(self) -> None:
        self._manager: Any = None  # jupyter_client AsyncKernelManager
        self.client: Any = None  # its client, made by the first notebook and kept for the next ones
        self.started = 0  # kernels started so far (1 unless one died)
        self.executed = 0  # notebooks executed

    def execute(self, notebook: Path, output: Path, parameters: Mapping[str, Any], cwd: Path) -> None:
        """Execute `notebook` with `parameters` into `output` (papermill errors propagate), in a kernel
        whose working directory is `cwd`. This process's own directory is never changed: papermill's
        ``cwd`` would chdir the whole process, which races between the workers' threads."""
        import papermill

        if self._manager is None or not self.alive():
            self._replace()
        if not self._manager.has_kernel:
            self.started += 1  # papermill's client starts it for this notebook
        self.executed += 1
        papermill.execute_notebook(str(notebook), str(output), parameters=dict(parameters), progress_bar=False,
                                   kernel_name=KERNEL_NAME, engine_name=ENGINE_NAME, km=self._manager,
                                   kernel_cwd=str(cwd), warm=self)

    def start(self, cwd: Path) -> None:
        """Start the kernel now, in `cwd` (where ``execute`` will run notebooks), instead of at the first
        notebook: it imports ``WARM_UP`` while the caller goes on, and the first notebook finds it ready.
        A kernel that cannot start here is started again by the first notebook, which reports why."""
        from jupyter_core.utils import run_sync

        self._replace()
        try:
            run_sync(self._manager.start_kernel)(extra_arguments=[*KERNEL_ARGUMENTS, HISTORY], cwd=str(cwd))
            self.started += 1
        except Exception:  # noqa: BLE001 - the first notebook starts it again and fails with the reason
            log.debug("early kernel start failed", exc_info=True)
            self.shutdown()

    def alive(self) -> bool:
        from jupyter_core.utils import run_sync

        return self._manager is not None and self._manager.has_kernel and run_sync(self._manager.is_alive)()

    def shutdown(self) -> None:
        from jupyter_core.utils import run_sync

        if self._manager is not None:
            setattr(self._manager, STOPPED, True)  # before its channels stop: a death a running notebook sees is ours
        if self.client is not None:
            self.client.stop_channels()
            self.client = None
        if self._manager is None:
            return
        try:
            if self._manager.has_kernel:
                run_sync(self._manager.shutdown_kernel)(now=True)
        except Exception:  # noqa: BLE001 - a kernel that died cannot be shut down; it is gone either way
            log.debug("kernel shutdown failed", exc_info=True)
        finally:
            self._manager = None

    def _replace(self) -> None:
        from jupyter_client.manager import AsyncKernelManager

        self.shutdown()
        self._manager = AsyncKernelManager(kernel_name=KERNEL_NAME)  # nbclient starts it on first execution
