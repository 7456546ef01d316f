"""The device a browse session's tabs emulate: the viewport's size, the device scale factor, and a mobile
phone (touch, a mobile user agent, the page's `<meta name=viewport>` honoured), so an agent can check a
responsive layout. One per session: every tab it has or opens later gets it."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..errors import BadRequest
from ..protocol import BrowseRequest, Viewport

if TYPE_CHECKING:  # the tab's session emulation uses this module's user agents (emulation.py, through the tab)
    from .tab import BrowseTab


@dataclass(frozen=True)
class Device:
    width: int = 1280
    height: int = 800
    scale: float = 1.0
    mobile: bool = False

    def describe(self) -> Viewport:
        return Viewport(width=self.width, height=self.height, scale=self.scale, mobile=self.mobile)


DESKTOP = Device()
# A phone when `mobile` is asked without a size: a common one's CSS viewport (390 × 844) at 3 device pixels
# per CSS pixel
PHONE = Device(390, 844, 3.0, True)


def wants_device(req: BrowseRequest) -> bool:
    """Whether the request sets any of the device's fields (open may; viewport must)."""
    return req.width is not None or req.height is not None or req.mobile is not None or req.scale is not None


def requested(current: Device, req: BrowseRequest) -> Device:
    """`current` with the request's fields: switching `mobile` starts from that kind's defaults (a phone's
    size and scale, or the desktop's), then the fields given override them."""
    if not wants_device(req):
        raise BadRequest("viewport needs at least one of width, height, mobile or scale (for example width 390, "
                         "height 844, mobile true)")
    base = current
    if req.mobile is not None and req.mobile != current.mobile:
        base = PHONE if req.mobile else DESKTOP
    return replace(base, width=req.width or base.width, height=req.height or base.height,
                   scale=req.scale or base.scale)


def major_version(browser_version: str) -> str:
    """"HeadlessChrome/140.0.7339.185" -> "140"."""
    m = re.search(r"/(\d+)\.", browser_version)
    return m.group(1) if m else "140"


def mobile_user_agent(browser_version: str) -> str:
    """Chrome on Android's (reduced) user agent, for the running Chrome's major version."""
    return (f"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) "
            f"Chrome/{major_version(browser_version)}.0.0.0 Mobile Safari/537.36")


async def emulate(tab: BrowseTab, device: Device, browser_version: str) -> None:
    """Give `tab` the device: its size and scale now (the page gets a resize); touch and the user agent
    from its next document on (the actor reloads the tab when `mobile` changes)."""
    await tab.call("Emulation.setDeviceMetricsOverride",
                   {"width": device.width, "height": device.height, "deviceScaleFactor": device.scale,
                    "mobile": device.mobile})
    await tab.call("Emulation.setTouchEmulationEnabled",
                   {"enabled": device.mobile, **({"maxTouchPoints": 5} if device.mobile else {})})
    await tab.call("Emulation.setUserAgentOverride", user_agent_params(device.mobile, browser_version))


def user_agent_params(mobile: bool, browser_version: str) -> dict[str, Any]:
    """Emulation.setUserAgentOverride's parameters for a phone (Chrome on Android's user agent and client
    hints) or a desktop (empty: Chrome's own)."""
    if not mobile:
        return {"userAgent": ""}
    return {"userAgent": mobile_user_agent(browser_version), "platform": "Linux armv81",
            "userAgentMetadata": {"platform": "Android", "platformVersion": "10", "architecture": "",
                                  "model": "K", "mobile": True,
                                  "brands": [{"brand": "Chromium", "version": major_version(browser_version)}]}}
