"""The Propius client: a daemon hosting one or many devices that check in, train and upload."""
