"""The fetch path: one URL to a page. `pipeline.py` composes it (cache, transport, render decision, shape);
the two transports load a main document, `over_http.py` by webfetch's own HTTP client and `in_chrome.py` in
a Chrome tab; `batch.py` runs a fetch with `urls` through the pipeline, URL by URL.

May import: the core (protocol, errors, urls, config, mime, paging, redact, _trio), the actors it drives
(cache, disk_cache, proxy, the chrome, parse, profiles, subagent and trust wings).
Must not import: browse/, crawl/ (crawl drives the pipeline, not the reverse), the server or daemon, frontends/."""
