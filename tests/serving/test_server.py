"""`vllm serve` on tpu under concurrent load, driven by the openai client:
1,000 requests 32 at a time with the server's memory flat; 40 requests at
once of mixed lengths, streaming and not, each equal to Hugging Face's
greedy tokens; a client that disconnects mid-stream and a prompt longer than
the model get their own outcome while the others are served; the server
then shuts down cleanly on SIGINT."""
import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from torch_tpu.vllm import models
from test_vllm import _hf_greedy


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = models.make(str(tmp_path_factory.mktemp("llama")), "llama")
    port = _free_port()
    log = tmp_path_factory.mktemp("log") / "server.log"
    env = dict(os.environ, VLLM_CACHE_ROOT=str(log.parent / "cache"))
    cmd = [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", path, "--port", str(port),
           "--dtype", "float32", "--max-model-len", "128", "--max-num-seqs", "32",
           "--max-num-batched-tokens", "256", "--kv-cache-memory-bytes", str(64 << 20),
           "--enforce-eager"]
    with open(log, "w") as out:
        # its own process group: the engine process it starts goes with it
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    deadline = time.time() + 600
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
            break
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                _kill_group(proc)
                pytest.fail("vllm serve did not come up:\n" + log.read_text()[-5000:])
            time.sleep(1)
    yield path, port, proc, log
    _kill_group(proc)  # (after a clean shutdown, nothing is left to kill)


def _kill_group(proc):
    """Kills the server and the engine process it started: killing the
    server alone would leave the engine running, orphaned."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _prompt(i):
    return [5 + (i * 7 + k) % 600 for k in range(3 + i % 20)]


def _rss(proc):
    """Resident memory of the server and its engine processes, bytes."""
    import psutil

    p = psutil.Process(proc.pid)
    return sum(q.memory_info().rss for q in [p, *p.children(recursive=True)])


def test_memory_stays_flat_over_1000_requests(server):
    from openai import AsyncOpenAI

    path, port, proc, log = server
    client = AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", timeout=600)

    async def one(i):  # prompts of 8, 16 or 4 tokens, each its own
        r = await client.completions.create(model=path, prompt=_prompt(i * 20 + 5 + 8 * (i % 3)),
                                            max_tokens=4, temperature=0,
                                            extra_body={"ignore_eos": True})
        return r.choices[0].finish_reason, r.usage.completion_tokens

    async def run():
        # waves of 32 requests at once; the first 224 warm the server up
        # (executables for the shapes these batches take), the other 800
        # must not grow it
        results, rss = [], []
        for wave in range(32):
            results += await asyncio.gather(*[one(i) for i in range(wave * 32, wave * 32 + 32)])
            rss.append(_rss(proc))
        return results, rss

    results, rss = asyncio.run(run())
    assert len(results) == 1024 and all(r == ("length", 4) for r in results), results[:5]
    warm, after = rss[6], rss[-1]
    print("server RSS per wave of 32 requests, MiB:", [r >> 20 for r in rss])
    # How requests that arrive over HTTP fall into engine steps varies from
    # run to run, and a step of a new shape adds executables (about 0.1 MiB
    # each, the in-memory cache bounded at 4096 of them): 800 requests grew
    # the engine by 70-90 MiB here. A leak per request shows in
    # test_vllm.py::test_engine_memory_is_flat_over_1280_requests, where the
    # steps repeat exactly.
    assert after - warm < 256 << 20, [r >> 20 for r in rss]
    urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5)


def test_concurrent_requests_cancellation_and_clean_shutdown(server):
    from openai import AsyncOpenAI, BadRequestError

    path, port, proc, log = server
    client = AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", timeout=600)
    extra = {"ignore_eos": True, "return_token_ids": True}

    async def one(i):
        if i % 2:
            r = await client.completions.create(model=path, prompt=_prompt(i), max_tokens=8,
                                                temperature=0, extra_body=extra)
            return list(r.choices[0].token_ids)
        toks = []
        stream = await client.completions.create(model=path, prompt=_prompt(i), max_tokens=8,
                                                 temperature=0, stream=True, extra_body=extra)
        async for chunk in stream:
            toks += list(chunk.choices[0].token_ids or [])
        return toks

    async def walk_away():  # reads two chunks of a long answer, then disconnects
        stream = await client.completions.create(model=path, prompt=_prompt(3), max_tokens=100,
                                                 temperature=0, stream=True, extra_body=extra)
        n = 0
        async for _ in stream:
            n += 1
            if n == 2:
                await stream.close()
                return n

    async def too_long():
        try:
            await client.completions.create(model=path, prompt=list(range(5, 205)), max_tokens=4)
        except BadRequestError as e:
            return str(e)
        return "accepted"

    async def run():
        return await asyncio.gather(*[one(i) for i in range(40)], walk_away(), too_long())

    results = asyncio.run(run())
    got, walked, refused = results[:40], results[40], results[41]
    assert walked == 2
    assert "maximum context length is 128 tokens" in refused, refused
    want = _hf_greedy(path, [_prompt(i) for i in range(40)], n=8)
    assert got == want
    urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5)  # still serving
    proc.send_signal(signal.SIGINT)
    assert proc.wait(120) == 0, log.read_text()[-3000:]
