from iclr26.cli import main

raise SystemExit(main())
