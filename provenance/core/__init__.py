"""The record and what makes it: provenance records, scopes, user code, attribution, annotation, bounded memo tables."""
