"""The embedded default backend: SQLite files under the recall home. Never imports the other backend."""
