"""Harness hooks: parse a harness's hook payload, call a service, build the hook's answer."""

# The largest payload a hook reads. A PostToolUse payload carries the tool's output, so it
# can be big; past this the hook does nothing and the harness keeps the original output.
# (Here, not in cli/hooks.py: the warm path's client reads a payload before click loads.)
MAX_PAYLOAD_BYTES = 64 << 20
