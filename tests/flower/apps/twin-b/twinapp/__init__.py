"""Twin b: same package name as its twin, different answer."""
