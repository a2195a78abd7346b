"""The local dashboard (`dsh-recall serve`): the report's figures with small charts, index
status per workspace, and a search box over every source.

Bound to 127.0.0.1 only, with Host / Origin checks (a page on another site cannot reach it
through DNS rebinding or read its answers), read-only (GET only), no external assets (one
HTML page, one script, one style sheet, all served from here, under a strict CSP). It
answers as the user, unfiltered, so only a request carrying this run's credential (the link
`serve` prints sets a cookie: credential.py) is answered at all: loopback is not the user.
"""
