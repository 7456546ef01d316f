"""Everything above the socket: the CLI, the socket client, `webfetch mcp`, what a model reads of a result,
doctor, the service and pi installers, and the pi extension (TypeScript, shipped as package data).

Nothing in the daemon imports this package (tests/test_layers.py); it may import the daemon's modules."""
