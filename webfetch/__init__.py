"""webfetch: a daemon that gives coding agents the web as clean markdown."""

__version__ = "0.1.0"
PROTOCOL_VERSION = 1
