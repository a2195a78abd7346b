"""Front ends: parse arguments and format answers. No ranking, no SQL here."""
