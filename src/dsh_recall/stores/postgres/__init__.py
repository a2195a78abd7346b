"""The PostgreSQL + pgvector backend, for an index a team shares. Never imports the other backend."""
