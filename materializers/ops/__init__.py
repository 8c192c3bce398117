"""Internal: operating materializers that ran. Lag, verify, view snapshots, rebuilds into a new
generation. The `materializers` CLI is their front door; `materializers.verify` and
`materializers.testing` export what code needs.
"""
