"""Runs and tracking, registered versions and their aliases, and the promotion scorer."""
