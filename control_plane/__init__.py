"""The Propius control plane: job API, client check-in/bind API, scheduler loop, hot and durable state."""
