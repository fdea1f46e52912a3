"""A kernel that ``WarmKernel.shutdown`` ends (a sweep interrupted by Ctrl-C) is not reported as having died:
a notebook still running in another thread raises nbclient's DeadKernelError, but its "Kernel died while
waiting for execute reply." error, shown as a warning before the sweep says "interrupted", is left out
(``tests/test_hardening.py`` checks the whole Ctrl-C path; this is the check alone, with stand-in channels)."""

import asyncio
import logging
import types

import nbformat
import pytest
from nbclient.exceptions import DeadKernelError

from rag_core.workbench.execution.kernels import STOPPED, WarmClient, log


class DeadChannels:
    def is_alive(self) -> bool:
        return False


class Manager:
    has_kernel = True


@pytest.mark.parametrize("stopped_on_purpose, logged", [(True, []), (False, ["Kernel died while waiting for execute reply."])])
def test_a_kernel_shut_down_on_purpose_raises_without_the_died_error(stopped_on_purpose, logged):
    manager = Manager()
    if stopped_on_purpose:
        setattr(manager, STOPPED, True)
    client = WarmClient(types.SimpleNamespace(nb=nbformat.v4.new_notebook()), km=manager, log=log)
    client.kc = DeadChannels()
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    log.addHandler(handler)
    try:
        with pytest.raises(DeadKernelError):
            asyncio.run(client._async_check_alive())
    finally:
        log.removeHandler(handler)
    assert [record.getMessage() for record in records] == logged


def test_shutdown_marks_the_kernel_before_its_channels_stop():
    from rag_core.workbench.execution.kernels import WarmKernel

    manager, seen = Manager(), []
    manager.has_kernel = False
    warm = WarmKernel()
    warm._manager = manager
    warm.client = types.SimpleNamespace(stop_channels=lambda: seen.append(getattr(manager, STOPPED, False)))
    warm.shutdown()
    assert seen == [True] and warm.client is None
