"""The event stream: every event type (events.py), its schema bounds, the session that emits it."""
