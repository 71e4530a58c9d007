"""Twin a: same package name as its twin, different answer."""
