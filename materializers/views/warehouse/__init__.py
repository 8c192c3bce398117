"""Internal: the Delta warehouse view (history + current tables), written by Spark or, for driver-sized
batches, by delta-rs."""
