"""The process exits cleanly with worker threads alive and work pending (subprocesses)."""
import subprocess
import sys
import textwrap

import pytest

PRELUDE = """
import threading
import streamlet.core as mx
BIG = (512, 512)
def two_stream_work(n=4):
    s1, s2 = mx.new_stream(mx.cpu), mx.new_thread_unsafe_stream(mx.cpu)
    outs = []
    for s in (s1, s2):
        x = mx.ones(BIG, stream=s)
        for _ in range(n):
            x = mx.matmul(x, mx.ones(BIG, stream=s), stream=s) * (1.0 / 512)
        outs.append(x)
    return outs
"""

SCRIPTS = {
    "workers_alive": """
        outs = two_stream_work()
        mx.eval(outs)
        assert all(o[0, 0].item() == 1.0 for o in outs)
        assert any(t.name == "streamlet-worker" for t in threading.enumerate())
        print("done")
    """,
    "async_eval_pending": """
        outs = two_stream_work(40)
        mx.async_eval(outs)
        print("done")
    """,
    "pending_failure_never_read": """
        s = mx.new_stream(mx.cpu)
        bad = mx.linalg.inv(mx.zeros((64, 64)), stream=s)
        mx.async_eval(mx.exp(bad, stream=s) + mx.ones((64, 64)))
        print("done")
    """,
    "exit_inside_stream_context": """
        import sys
        with mx.stream(mx.new_thread_unsafe_stream(mx.cpu)):
            mx.async_eval(two_stream_work(10))
            print("done")
            sys.exit(0)
    """,
    "other_threads_streams": """
        tls = mx.new_thread_local_stream(mx.cpu)
        def work():
            x = mx.ones(BIG, stream=tls)
            for _ in range(20):
                x = mx.matmul(x, x, stream=tls) * (1.0 / 512)
            mx.async_eval(x)
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print("done")
    """,
    "workers_started_during_shutdown": """
        # a wide pool (as on a many-core machine) keeps starting workers while the work
        # queued at exit wakes parked streams; none may still run when the interpreter
        # finalizes (that crashed or hung on a 16-core machine)
        import atexit, os, sys
        from streamlet.core import scheduler
        scheduler.POOL.size = 64
        def check():
            alive = [t for t in threading.enumerate() if t.name == "streamlet-worker"]
            if alive:
                sys.stderr.write(f"{len(alive)} workers alive after shutdown")
                sys.stderr.flush()
                os._exit(3)
        atexit.register(check)
        streams = [mx.new_stream(mx.cpu) for _ in range(12)]
        outs = []
        for k in range(4):
            x = mx.ones((256, 256), stream=streams[0])
            for s in streams:
                x = mx.matmul(x, mx.ones((256, 256), stream=s), stream=s) * (1.0 / 256)
            outs.append(x)
        mx.async_eval(outs)
        print("done")
    """,
    "many_streams_no_clear": """
        streams = [mx.new_stream(mx.cpu) for _ in range(2000)]
        mx.async_eval([mx.ones((4,), stream=s) + 1 for s in streams])
        print("done")
    """,
}


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_clean_exit(name):
    code = PRELUDE + textwrap.dedent(SCRIPTS[name])
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.strip() == "done"
