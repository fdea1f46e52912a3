"""After Ctrl-C, what the dying notebook tasks leave behind is one line each (issue 20 item 6).

A CI run (one-worker sweep, Ctrl-C while a cell ran) printed asyncio's "Task was destroyed but it is
pending!" with the task's repr, then a RuntimeWarning for the cell's coroutine collected unawaited, with
the source line of ``return 130``. Each case is reproduced in a child process, whose stderr is what a
user sees."""
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import asyncio, gc, logging, sys
    from rag_core import cli
    logging.basicConfig(level=logging.WARNING, format="warning: %(message)s")
    cli._quiet_after_interrupt()

    async def cell():
        await asyncio.sleep(3600)

    loop = asyncio.new_event_loop()
    task = loop.create_task(cell())
    loop.run_until_complete(asyncio.sleep(0))  # the task starts and waits
    del task
    loop.close()
    gc.collect()                               # "Task was destroyed but it is pending!"
    never_awaited = cell()
    del never_awaited
    gc.collect()                               # "coroutine 'cell' was never awaited"
    print("done", file=sys.stderr)
""")


def test_a_pending_task_and_an_unawaited_coroutine_are_one_line_after_an_interrupt():
    result = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
    lines = result.stderr.splitlines()
    assert result.returncode == 0, result.stderr
    assert lines == ["interrupted: a notebook task was still pending (ignored)", "done"], lines


def test_without_the_interrupt_the_same_child_prints_asyncios_own_message():
    """The child does provoke both messages: without ``_quiet_after_interrupt`` they are printed."""
    child = CHILD.replace("cli._quiet_after_interrupt()", "")
    result = subprocess.run([sys.executable, "-W", "default", "-c", child], capture_output=True, text=True, timeout=120)
    assert "Task was destroyed but it is pending!" in result.stderr
    assert "was never awaited" in result.stderr
