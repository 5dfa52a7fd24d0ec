"""Provider drivers: each module is the only code that speaks its provider's API."""
