"""Who is calling: the Caller (`model`), the rules on what it may do (`access`), and the edge's lookups."""
