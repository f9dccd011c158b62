from leteo_fed.cli.main import main

raise SystemExit(main())
