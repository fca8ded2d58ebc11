"""Small shared helpers: clocks, topic-partition names. Imports nothing of ours but records."""
