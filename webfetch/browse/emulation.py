"""What a browse session makes its pages believe about where they run, for an agent forcing its own app's
states: the network off (`offline`). One per session: every tab it has or opens later gets it, and it goes
with the session."""

from __future__ import annotations

from dataclasses import dataclass

from .tab import BrowseTab


@dataclass
class Emulation:
    offline: bool = False

    async def apply(self, tab: BrowseTab) -> None:
        """Give `tab` what is set now (a new tab, or every tab after a change)."""
        # Chrome's network conditions: offline fails every request as the network would
        # (net::ERR_INTERNET_DISCONNECTED) and the page sees navigator.onLine false and its `offline` event
        await tab.call("Network.emulateNetworkConditions", {"offline": self.offline, "latency": 0,
                                                             "downloadThroughput": -1, "uploadThroughput": -1})

    def summary(self) -> list[str]:
        """What is set, in a few words each (the snapshot's first line, `emulate`'s reply)."""
        return ["offline"] if self.offline else []
