"""What a browse session forces on its pages: its routes (routes.py) and its emulation (emulation.py). The
one place that answers a request the session's host gate let through (tab.py pauses every request for the
gate): a route's answer, or on to the network. And what the snapshot's first line says while anything is
forced, so an agent reading a page never forgets that it is not the page as it is."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .emulation import Emulation
from .network import NetworkLog
from .routes import RouteTable, is_preflight, preflight

Call = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


class Forced:
    """A session's routes and emulation; each of its tabs answers its paused requests here."""

    def __init__(self, network: NetworkLog) -> None:
        self.routes = RouteTable()
        self.emulation = Emulation()
        self._network = network

    async def answer(self, tab: str, p: dict[str, Any], call: Call) -> int | None:
        """Answer `tab`'s paused request `p` (Fetch.requestPaused, at the request stage, let through by the
        gate); the status a route answered it with, if one did (Chrome pauses no response stage for it)."""
        rid, request = p["requestId"], p["request"]
        if not len(self.routes) and not self.emulation.headers:  # the common case: nothing more to do
            await call("Fetch.continueRequest", {"requestId": rid})
            return None
        url = request["url"]
        if is_preflight(request):
            route = self.routes.match(url, use=False)  # the request it stands for is what the route answers
            if route is not None:
                await call(*preflight(rid, request))
                return None
        route = self.routes.match(url)
        if route is None:
            await call("Fetch.continueRequest", {"requestId": rid, **self._headers(url, request)})
            return None
        self._network.on_routed(tab, p.get("networkId"), f"route {route.number}: {route.outcome()}")
        await call(*route.fulfil(rid, request))
        return None if route.abort else route.status

    def _headers(self, url: str, request: dict[str, Any]) -> dict[str, Any]:
        """Fetch.continueRequest's `headers` for a request that gets the emulated extra headers (its own
        with them, a name given replacing its own), or nothing."""
        extra = self.emulation.headers_for(url)
        if not extra:
            return {}
        names = {name.lower() for name, _ in extra}
        own = [(k, str(v)) for k, v in (request.get("headers") or {}).items() if k.lower() not in names]
        return {"headers": [{"name": k, "value": v} for k, v in [*own, *extra]]}

    def summary(self) -> str | None:
        """What is forced, in a few words (`offline; 2 routes`), or None: the snapshot's first line and each
        result's `forced` say it while it holds."""
        parts = self.emulation.summary()
        if len(self.routes):
            parts.append(f"{len(self.routes)} route{'s' if len(self.routes) != 1 else ''}")
        return "; ".join(parts) or None
