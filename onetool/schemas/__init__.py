"""JSON schemas: the one reading of a schema (``walk``) and values checked against one within bounds
(``validation``)."""
