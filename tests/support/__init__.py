"""Test doubles that are real things: servers on localhost, not mocks."""
