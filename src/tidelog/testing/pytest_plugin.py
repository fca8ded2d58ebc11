"""pytest plugin entry point (registered as ``tidelog`` in pyproject); fixtures live here."""
