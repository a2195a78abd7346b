"""Who is asking and what they may see: the caller's access channel (channel.py: `Viewer`,
resolved from the session map; never chosen by a tool call) and the notes the user forgot
(forgotten.py: their fingerprints, and the filter history and object searches apply with
them). The rules themselves are policy (policy/access.py, policy/forget.py).
"""
