"""A Message-API app whose ClientApp counts messages in its Context, or fails on request."""
