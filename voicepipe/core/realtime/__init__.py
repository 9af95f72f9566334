"""The OpenAI Realtime API, sans-I/O: events in and out, their decoder and the session.

``api`` is the one import the ``/v1/realtime`` shell needs; docs/REALTIME.md is the
event-by-event compatibility table.
"""
