"""Developer tooling for the local stack and the tests (not deployed)."""
