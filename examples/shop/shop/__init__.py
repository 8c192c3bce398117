"""The demo's shop: an Order aggregate (event-sourced) and a products table (captured by Debezium),
kept as views by two materializers. A separate distribution on purpose: the toolkit ships no domain of
its own, and these plug in through the same public API and entry points as a user's project."""
