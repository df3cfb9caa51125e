"""A sweep's search on the driver: Tune's trial schedulers and search algorithms."""
