"""Recommend: verify the best candidates against the default launch, interleaved, and pick a
winner within the accuracy tolerance; the same statistics drive `autotune compare`."""
