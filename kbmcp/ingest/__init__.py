"""Ingestion: finding files, parsing them into documents and cutting documents into chunks."""
