"""Consumer groups: the classic group coordinator and ``__consumer_offsets``."""
