"""Profiles: named, persistent browser state (cookies, each origin's localStorage) that fetch and browse
share. `store.py` is the store and the one rule of what a profile may be used for; `use.py` what a fetch or
a browse session does with one in a browser context.

May import: the core (errors, urls), trust/, page_scripts, and chrome/'s handles (`BrowserContext`, cdp's
errors).
Must not import: fetch/, crawl/, parse/, browse/."""
