"""Source verification: checking that cited URLs, paths, CI runs and issues resolve (spec section 3.3)."""
