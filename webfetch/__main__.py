from .frontends.cli import main

raise SystemExit(main())
