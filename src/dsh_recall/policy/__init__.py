"""Pure decisions over plain data (no SQL, no I/O): the offload cut, the auto-recall gate,
anchors, access levels, restore, reads."""
