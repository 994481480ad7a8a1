"""Schemathesis hooks of the fuzz tier (loaded through SCHEMATHESIS_HOOKS)."""
import schemathesis

# The inbound-email webhook takes a raw mail (message/rfc822): text, sent as text is.
schemathesis.serializer.alias("message/rfc822", "text/plain")
