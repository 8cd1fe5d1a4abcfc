"""The contract between the session and an exporter (provenance/log/exporter.py, the log's own
contract with whatever consumes its events), for the exporters of this folder and the user's own."""

from provenance.log.exporter import Event, Exporter

__all__ = ["Event", "Exporter"]
