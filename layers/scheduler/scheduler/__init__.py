"""openalice-scheduler domain: lease model, store, provider drivers, selection policy and use cases."""

SERVICE_NAME = "openalice-scheduler"
