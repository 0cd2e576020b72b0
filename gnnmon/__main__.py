from gnnmon.cli import main

raise SystemExit(main())
