"""Exporters: where provenance records and compile events go (JSONL logs, OpenTelemetry).

Each exporter consumes the same event stream (provenance.log.events), through the `Exporter` protocol
of base.py; docs/log-schema.md describes the events.
"""
