"""Unit tests of the `scheduler` domain package (no Docker; DynamoDB is a loopback moto server)."""
