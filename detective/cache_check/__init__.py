"""`detective cache-check`: prove that a warm restart reuses the persistent compilation cache."""
