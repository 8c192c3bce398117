"""The toolkit's real services as local processes, for machines without a Docker engine."""
