"""The owners' webhooks: the registry's model and use cases (`model`, `registry`), Standard Webhooks signing
(`signing`), the safe-target rules (`targets`), one delivery attempt over HTTP (`sender`), the retry schedule
(`retries`) and the delivery function's use case (`deliver`)."""
