"""Rules about whose something is, each in one place: whose socket it is (`socket_trust.py`), files only
their user may read, written whole (`private_files.py`), commands webfetch suggests, safe to paste
(`shell.py`). The daemon and the frontends both apply them.

May import: the core (errors) and the rest of trust/.
Must not import: any other wing (chrome/, fetch/, crawl/, parse/, profiles/, subagent/, browse/, frontends/)."""
