"""Inline forms per content type for offloaded tool results (test runners, compilers and
linters, JSON/NDJSON, CSV and tables, diffs and `git log`, install logs): `registry.detect`
names the type from a sample of lines, `registry.select` picks the lines the form shows and
names every run it leaves out, `render.layout` lays them out around the offload note."""
