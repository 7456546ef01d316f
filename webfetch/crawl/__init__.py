"""The crawl and map ops: a site's pages from a start URL (`crawler.py`), obeying robots.txt (`robots.py`),
reading its sitemaps (`sitemap.py`), each host's requests paced (`politeness.py`).

May import: the core (protocol, errors, urls, config), fetch/ (pages load through its pipeline, into the
cache), parse/ (links, the include/exclude patterns, the extractor), http_body.
Must not import: browse/, the server or daemon, frontends/."""
