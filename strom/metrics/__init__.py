"""Prometheus metrics of a broker: plain counters on the hot path, Kafka-named families at scrape time."""
