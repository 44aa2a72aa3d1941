"""The single SQLite file: connection, migrations, and the SQL that reads and writes it."""
