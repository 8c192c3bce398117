"""An example project built on kafka-toolkit's public API only: see README.md."""
