"""Exporters: where provenance records and compile events go (JSONL logs, OpenTelemetry).

Each exporter consumes the same event stream; see the JSONL and OTel issues.
"""
