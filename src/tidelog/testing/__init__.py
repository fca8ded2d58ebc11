"""Embedded broker and pytest fixture for users tests."""
