"""Chrome: the actor that keeps one browser up and hands out its handles (`browser.py`: `Chrome`, `Tab`,
`BrowserContext`, `PageTarget`), finding and launching it (`launch.py`), and our CDP client (`cdp.py`) over
its pipe or a websocket (`transport.py`).

May import: the core (errors, config, urls, redact, _trio), proxy, children.
Must not import: fetch/, crawl/, parse/, browse/, profiles/, subagent/: they drive Chrome, not the reverse."""
