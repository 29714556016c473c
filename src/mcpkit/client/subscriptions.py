"""``subscriptions/listen`` (modern era): how a :class:`~mcpkit.client.Client` opens the
stream and waits for its acknowledgement, and the :class:`Subscription` it returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..protocol.errors import INVALID_REQUEST, MCPError

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Subscription", "listen"]

logger = logging.getLogger("mcpkit.client")


async def listen(
    client: Client,
    *,
    tools: bool,
    prompts: bool,
    resources: bool,
    resource_uris: Sequence[str],
    timeout: float | None,
) -> Subscription:
    """:meth:`Client.listen <mcpkit.client.Client.listen>`: open the stream, return once acknowledged."""
    session = client._session
    if session is None or not client.is_modern:
        raise RuntimeError("subscriptions/listen needs a connected modern-era client")
    client._listens += 1
    sid = f"listen-{client._listens}"
    wanted: dict[str, Any] = {}
    if tools:
        wanted["toolsListChanged"] = True
    if prompts:
        wanted["promptsListChanged"] = True
    if resources:
        wanted["resourcesListChanged"] = True
    if resource_uris:
        wanted["resourceSubscriptions"] = list(resource_uris)
    acked = client.handlers.expect_ack(sid)
    task = asyncio.ensure_future(
        client._send(
            session, "subscriptions/listen", client._params({"notifications": wanted}), None, None, sid
        )
    )
    # Ended by Subscription.close(), by close(), or by the connection (its outcome is
    # then read here: nobody may be left to await it).
    client._subscriptions.add(task)
    task.add_done_callback(lambda done: _listen_ended(client, done))
    try:
        async with asyncio.timeout(timeout if timeout is not None else client.timeout):
            waiting: list[asyncio.Future[Any]] = [acked, task]
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if task in done and not acked.done():
            task.result()  # an error answer: raise it
            raise MCPError(INVALID_REQUEST, "subscriptions/listen ended before it was acknowledged")
    except BaseException:
        task.cancel()
        raise
    return Subscription(sid, acked.result(), task)


def _listen_ended(client: Client, task: asyncio.Future[Any]) -> None:
    client._subscriptions.discard(task)
    if not task.cancelled() and task.exception() is not None:
        logger.debug("subscriptions/listen ended: %s", task.exception())


class Subscription:
    """An open ``subscriptions/listen`` stream; :meth:`close` ends it."""

    def __init__(self, subscription_id: str, acknowledged: dict[str, Any], task: asyncio.Future[Any]) -> None:
        self.id = subscription_id
        #: The filter the server agreed to honour.
        self.acknowledged = acknowledged
        self._task = task

    @property
    def active(self) -> bool:
        return not self._task.done()

    async def close(self) -> None:
        """Cancel it (stdio: notifications/cancelled; HTTP: the stream is closed)."""
        self._task.cancel()
        with contextlib.suppress(BaseException):
            await self._task
