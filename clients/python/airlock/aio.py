"""AsyncSandbox: the Sandbox for asyncio code, each call run in a worker thread
(asyncio.to_thread), so the event loop never blocks on the daemon. Streaming callbacks are
called in that worker thread."""

import asyncio
import functools

from .sandbox import Sandbox, run


class AsyncFiles:
    def __init__(self, files):
        self._f = files

    async def write(self, path, data):
        return await asyncio.to_thread(self._f.write, path, data)

    async def read(self, path):
        return await asyncio.to_thread(self._f.read, path)

    async def read_text(self, path, encoding="utf-8"):
        return await asyncio.to_thread(self._f.read_text, path, encoding)

    async def list(self, dir=""):
        return await asyncio.to_thread(self._f.list, dir)

    async def remove(self, path):
        return await asyncio.to_thread(self._f.remove, path)


class AsyncSandbox:
    """`sb = await AsyncSandbox.create(...)` (the Sandbox's arguments) or
    `async with await AsyncSandbox.create() as sb:`; every Sandbox method is a coroutine."""

    def __init__(self, sandbox):
        self.sync = sandbox
        self.id = sandbox.id
        self.files = AsyncFiles(sandbox.files)

    @classmethod
    async def create(cls, *args, **kwargs):
        return cls(await asyncio.to_thread(Sandbox, *args, **kwargs))

    @classmethod
    async def connect(cls, id, **kwargs):
        return cls(await asyncio.to_thread(Sandbox.connect, id, **kwargs))

    @staticmethod
    async def list(**kwargs):
        return await asyncio.to_thread(Sandbox.list, **kwargs)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await asyncio.to_thread(self.sync.__exit__, *exc)

    async def _call(self, name, *args, **kwargs):
        return await asyncio.to_thread(getattr(self.sync, name), *args, **kwargs)

    async def fork(self, n=1):
        return [AsyncSandbox(s) for s in await self._call("fork", n)]

    def __getattr__(self, name):
        # info, run_code, interrupt, stop, resume, update, delete: the same arguments as
        # Sandbox's, awaited.
        if name in ("info", "run_code", "interrupt", "stop", "resume", "update", "delete"):
            return functools.partial(self._call, name)
        raise AttributeError(name)


async def arun(code, files=None, **kwargs):
    """airlock.run() as a coroutine."""
    return await asyncio.to_thread(run, code, files, **kwargs)
