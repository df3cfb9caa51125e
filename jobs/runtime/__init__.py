"""Runtime helpers: console, cluster connection, fault injection, resubmission checks, DeepSpeed op locks."""
