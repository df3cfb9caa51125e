"""Configuration: YAML + overrides (io), the sections every job shares, one typed tree per job."""
