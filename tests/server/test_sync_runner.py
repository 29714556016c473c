"""SyncRunner: a threaded handler's result is not kept alive once it was returned."""

from __future__ import annotations

import gc
import weakref

from mcpkit.server.sync import SyncRunner


class Payload:
    """Stands for a large result (bytes cannot be weakly referenced)."""


async def test_threaded_result_is_freed_without_the_gc() -> None:
    refs: list[weakref.ref[Payload]] = []

    def handler() -> Payload:
        payload = Payload()
        refs.append(weakref.ref(payload))
        return payload

    runner = SyncRunner(handler, threaded=True)
    gc.disable()  # the executor's and the loop's futures form a cycle: only the GC would free it
    try:
        for _ in range(3):
            result = await runner({})
            assert isinstance(result, Payload)
            del result
            assert refs[-1]() is None
    finally:
        gc.enable()
