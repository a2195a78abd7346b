"""Harness hooks: parse a harness's hook payload, call a service, build the hook's answer."""
