"""`python -m openalice_scheduler_client` runs `leasectl`."""

from .cli import main

raise SystemExit(main())
