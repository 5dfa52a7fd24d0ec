"""How the local-docker driver reaches a Docker Engine: mutual TLS, API version, time limits, named failures."""
