"""Local fakes of third-party services, for tests only (never imported by `layers/` or `functions/`)."""
