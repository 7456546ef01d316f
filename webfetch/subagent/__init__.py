"""The sub-agent: an LLM CLI (pi) asked about one page (`agent.py`, the actor), on warm `pi --mode rpc`
workers (`pi_workers.py`).

May import: the core (protocol, config, errors, _trio), children, trust/.
Must not import: chrome/, fetch/, crawl/, parse/, browse/: it is given a page's text, never a browser."""
