"""Small shared helpers: clocks, topic-partition names, Java's string hash.

Imports nothing of ours but records."""
